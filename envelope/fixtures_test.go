package envelope_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/fixtures"
)

var update = flag.Bool("update", false, "rewrite golden files (testdata/golden) from the current output")

// parseAll runs a Reader over in and returns one JSON value per envelope or
// error, in the form of `crosstalk parse --json` (docs/design.md §3.4).
func parseAll(t testing.TB, in []byte, strict bool) []any {
	t.Helper()
	r := envelope.NewReader(bytes.NewReader(in))
	r.Strict = strict
	var out []any
	for {
		e, err := r.Next()
		if err == io.EOF {
			return out
		}
		var se *envelope.SyntaxError
		if errors.As(err, &se) {
			out = append(out, map[string]any{"error": map[string]any{"code": string(se.Code), "line": float64(se.Line)}})
			continue
		}
		if err != nil {
			t.Fatalf("Next() = %v, want an envelope, a *SyntaxError or io.EOF", err)
		}
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatalf("json.Marshal(%v) = %v", e, err)
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
}

// readJSONL reads an expected-output file; error objects keep only code and
// line, since messages are free text.
func readJSONL(t *testing.T, name string) []any {
	t.Helper()
	b, err := fixtures.FS.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var out []any
	for i, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var v any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("%s:%d: %v", name, i+1, err)
		}
		if m, ok := v.(map[string]any); ok {
			if e, ok := m["error"].(map[string]any); ok {
				delete(e, "message")
			}
		}
		out = append(out, v)
	}
	return out
}

func fixtureNames(t testing.TB) []string {
	t.Helper()
	names, err := fixtures.Envelopes()
	if err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatal("fixtures.Envelopes() found no vectors")
	}
	return names
}

// TestFixtures runs every language-neutral vector in fixtures/envelope in
// lenient and strict mode against its expected JSON Lines.
func TestFixtures(t *testing.T) {
	for _, name := range fixtureNames(t) {
		t.Run(name, func(t *testing.T) {
			in, err := fixtures.FS.ReadFile("envelope/" + name + ".txt")
			if err != nil {
				t.Fatal(err)
			}
			want := readJSONL(t, "envelope/"+name+".jsonl")
			got := parseAll(t, in, false)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("parse(%s) =\n%s\nwant\n%s", name, show(got), show(want))
			}
			strictName := "envelope/" + name + ".strict.jsonl"
			if _, err := fixtures.FS.ReadFile(strictName); err == nil {
				want = readJSONL(t, strictName)
			}
			got = parseAll(t, in, true)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("parse --strict (%s) =\n%s\nwant\n%s", name, show(got), show(want))
			}
		})
	}
}

func show(v []any) string {
	var b strings.Builder
	for _, x := range v {
		j, _ := json.Marshal(x)
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}

// TestGoldenFmt writes the canonical form of every fixture to
// testdata/golden/NAME.fmt (with -update) and checks that formatting is
// idempotent: the golden file formats to itself, and reads back to the
// same envelopes.
func TestGoldenFmt(t *testing.T) {
	for _, name := range fixtureNames(t) {
		t.Run(name, func(t *testing.T) {
			in, err := fixtures.FS.ReadFile("envelope/" + name + ".txt")
			if err != nil {
				t.Fatal(err)
			}
			got, envs := format(t, in)
			path := filepath.Join("testdata", "golden", name+".fmt")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("fmt(%s) =\n%s\nwant\n%s", name, got, want)
			}
			again, envs2 := format(t, got)
			if !bytes.Equal(again, got) {
				t.Errorf("fmt(fmt(%s)) =\n%s\nwant\n%s", name, again, got)
			}
			if len(envs2) != len(envs) {
				t.Fatalf("fmt output of %s reads as %d envelopes, want %d", name, len(envs2), len(envs))
			}
			for i := range envs {
				assertSameValue(t, envs2[i], envs[i])
			}
		})
	}
}

// format returns the canonical form of every envelope in in, separated by
// blank lines (what `crosstalk fmt` prints), and the envelopes.
func format(t *testing.T, in []byte) ([]byte, []*envelope.Envelope) {
	t.Helper()
	var out bytes.Buffer
	w := envelope.NewWriter(&out)
	r := envelope.NewReader(bytes.NewReader(in))
	var envs []*envelope.Envelope
	for {
		e, err := r.Next()
		if err == io.EOF {
			return out.Bytes(), envs
		}
		if err != nil {
			continue
		}
		if err := w.Write(e); err != nil {
			t.Fatalf("Write(%v) = %v", e, err)
		}
		envs = append(envs, e)
	}
}

// assertSameValue compares two envelopes as values: everything but the
// input position, completeness, source bytes and warnings, and the v1.0
// spellings (legacy intent, response form) that the canonical v1.1 form
// does not keep by design (docs/design.md §3.1).
func assertSameValue(t *testing.T, got, want *envelope.Envelope) {
	t.Helper()
	g, w := *got, *want
	g.Line, w.Line = 0, 0
	g.Complete, w.Complete = true, true
	g.LegacyIntent, w.LegacyIntent = "", ""
	gj, _ := json.Marshal(&g)
	wj, _ := json.Marshal(&w)
	if !bytes.Equal(gj, wj) {
		t.Errorf("round trip = %s, want %s", gj, wj)
	}
}

func TestFixtureCount(t *testing.T) {
	if n := len(fixtureNames(t)); n < 80 {
		t.Errorf("len(fixtures) = %d, want at least 80", n)
	}
}
