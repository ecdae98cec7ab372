package web_test

import (
	"encoding/json"
	"fmt"
	"html"
	"regexp"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// TestGroupsPageBoundedByGroups: the groups page counted the unread
// messages of every group on every view — and an open page is drawn again
// each second the ledger changes — so a relay with 300 groups spent
// 0.6 s of CPU per open tab per second. A page now shows 100 groups by
// id and links to the next; every group is still reachable.
func TestGroupsPageBoundedByGroups(t *testing.T) {
	const groups = 250
	var rc *readCounter
	h := newHarness(t, &harnessOptions{wrap: func(st ledger.Store) ledger.Store { rc = &readCounter{Store: st}; return rc }})
	recs := make([]ledger.Record, groups)
	for i := range recs {
		env := envelope.New("CHATGPT", "CLAUDE", envelope.IntentRequest, fmt.Sprintf("hello %d", i))
		b, err := json.Marshal(gateway.EventData{Text: env.Body, To: []string{"claude"},
			X: &gateway.XCrosstalk{Envelope: env, Transport: "test", Sender: "chatgpt", Verification: gateway.StatusUnsigned}})
		if err != nil {
			t.Fatal(err)
		}
		recs[i] = ledger.Record{Kind: gateway.KindMessage, GroupID: fmt.Sprintf("grp-%03d", i), By: "chatgpt", Data: b}
	}
	if _, err := rc.Store.Append(t.Context(), recs); err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`<a href="/ui/groups/(grp-\d+)">`)
	next := regexp.MustCompile(`href="(/\?after=[^"]+)"[^>]*>next groups`)
	seen := map[string]bool{}
	path, pages := "/", 0
	for {
		rc.ranged.Store(0)
		code, body := h.get(path)
		if code != 200 {
			t.Fatalf("GET %s = %d\n%s", path, code, body)
		}
		rows := row.FindAllStringSubmatch(body, -1)
		if len(rows) > 100 {
			t.Fatalf("GET %s shows %d groups, want at most 100", path, len(rows))
		}
		// One message per group shown (the queue reads the log, not
		// the groups).
		if n := rc.ranged.Load(); n > int64(len(rows)) {
			t.Fatalf("GET %s read %d events of groups for %d groups shown", path, n, len(rows))
		}
		for _, m := range rows {
			if seen[m[1]] {
				t.Fatalf("group %s shown twice", m[1])
			}
			seen[m[1]] = true
		}
		pages++
		m := next.FindStringSubmatch(body)
		if m == nil {
			if pages > 1 && !strings.Contains(body, `href="/">first groups`) {
				t.Errorf("the last page %s has no link to the first", path)
			}
			break
		}
		path = html.UnescapeString(m[1])
	}
	if len(seen) != groups || pages != 3 {
		t.Errorf("saw %d groups in %d pages, want %d in 3", len(seen), pages, groups)
	}
}
