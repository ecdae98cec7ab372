package metrics

import (
	"encoding/json"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// names returns the name of every crosstalk metric a fully wired Metrics
// can export, from the collectors' descriptions (no scrape needed).
func names(t *testing.T) map[string]bool {
	t.Helper()
	m := New(&Options{NoRuntime: true})
	m.WatchRelay(nil)
	m.WatchJetStream(nil, "")
	m.WatchSQLite(nil)
	ch := make(chan *prometheus.Desc, 100)
	for _, c := range m.own {
		c.Describe(ch)
	}
	close(ch)
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	out := map[string]bool{}
	for d := range ch {
		out[fq.FindStringSubmatch(d.String())[1]] = true
	}
	return out
}

// TestDocsListEveryMetric: docs/operations.md lists exactly the metrics
// the package exports.
func TestDocsListEveryMetric(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(crosstalk_[a-z_]+)` \\|").FindAllStringSubmatch(string(doc), -1) {
		listed[m[1]] = true
	}
	have := names(t)
	if !maps.Equal(listed, have) {
		t.Errorf("docs/operations.md lists %v,\nthe package exports %v", slices.Sorted(maps.Keys(listed)), slices.Sorted(maps.Keys(have)))
	}
}

// TestDashboard: docs/grafana-dashboard.json is valid JSON whose queries
// name only metrics the package exports, and it has a panel for each of
// them but the plain stream counter.
func TestDashboard(t *testing.T) {
	b, err := os.ReadFile("../../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string
		Panels []struct {
			Type, Title string
			Targets     []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("the dashboard is not valid JSON: %v", err)
	}
	have := names(t)
	used := map[string]bool{}
	metric := regexp.MustCompile(`\bcrosstalk_[a-z_]+`)
	for _, p := range dash.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, name := range metric.FindAllString(tg.Expr, -1) {
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					if n, ok := strings.CutSuffix(name, suffix); ok && have[n] {
						name = n
					}
				}
				if !have[name] {
					t.Errorf("panel %q queries %s, which the relay does not export", p.Title, name)
				}
				used[name] = true
			}
		}
	}
	for name := range have {
		if !used[name] && name != "crosstalk_streams_total" {
			t.Errorf("no panel shows %s", name)
		}
	}
}
