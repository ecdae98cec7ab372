package browser_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/crosstalk-go/crosstalk/fixtures"
	"github.com/crosstalk-go/crosstalk/transports/browser"
)

// built is the extension, built once per test binary.
var built struct {
	once sync.Once
	dir  string
	err  error
}

// buildExtension builds the unpacked extension into a directory shared by
// the tests of this binary.
func buildExtension(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "crosstalk-ext-")
		if built.err == nil {
			built.err = browser.Build(context.Background(), built.dir, nil)
		}
	})
	if built.err != nil {
		t.Fatalf("Build: %v", built.err)
	}
	return built.dir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// needNode returns node's path; without node the test fails under CI=true
// and is skipped elsewhere.
func needNode(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("node is not installed (scripts/deps.sh installs nodejs)")
		}
		t.Skip("node is not installed")
	}
	return node
}

// runWasm runs cases through the extension's WebAssembly under Node.js.
func runWasm(t *testing.T, cases []map[string]any) []string {
	t.Helper()
	node := needNode(t)
	dir := buildExtension(t)
	in, _ := json.Marshal(cases)
	cmd := exec.CommandContext(t.Context(), node, filepath.Join("testdata", "wasmrun.js"), filepath.Join(dir, "wasm_exec.js"), filepath.Join(dir, "crosstalk.wasm"))
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node wasmrun.js: %v\n%s", err, stderr.String())
	}
	var got []string
	if err := json.Unmarshal(out, &got); err != nil || len(got) != len(cases) {
		t.Fatalf("node wasmrun.js printed %d results (%v), want %d", len(got), err, len(cases))
	}
	return got
}

// TestWasmParseMatchesCLI: the WebAssembly parser of the extension prints,
// for every envelope fixture, lenient and strict, the JSON Lines of the
// fixture's .jsonl (.strict.jsonl) file — which cmd/crosstalk's
// TestParseJSONContract checks `crosstalk parse --json` against — byte for
// byte, and the same as ParseJSON compiled for this machine.
func TestWasmParseMatchesCLI(t *testing.T) {
	names, err := fixtures.Envelopes()
	if err != nil {
		t.Fatal(err)
	}
	type want struct{ name, file string }
	var cases []map[string]any
	var wants []want
	for _, name := range names {
		text, _ := fixtures.FS.ReadFile("envelope/" + name + ".txt")
		for _, strict := range []bool{false, true} {
			file := "envelope/" + name + ".jsonl"
			if _, err := fixtures.FS.ReadFile("envelope/" + name + ".strict.jsonl"); strict && err == nil {
				file = "envelope/" + name + ".strict.jsonl"
			}
			cases = append(cases, map[string]any{"b64": text, "strict": strict}) // []byte: base64 in JSON
			label := name
			if strict {
				label += " --strict"
			}
			wants = append(wants, want{label, file})
		}
	}
	got := runWasm(t, cases)
	for i, w := range wants {
		expected, _ := fixtures.FS.ReadFile(w.file)
		native, err := browser.ParseJSON(string(cases[i]["b64"].([]byte)), cases[i]["strict"].(bool))
		if err != nil {
			t.Fatalf("%s: ParseJSON: %v", w.name, err)
		}
		if !sameJSONLines(t, got[i], string(expected)) {
			t.Errorf("%s: wasm parse =\n%s\nwant (%s)\n%s", w.name, got[i], w.file, expected)
		}
		if got[i] != string(native) {
			t.Errorf("%s: wasm parse differs from ParseJSON:\n%s\nvs\n%s", w.name, got[i], native)
		}
	}
	if len(wants) < 100 {
		t.Errorf("only %d fixture runs: fixtures missing?", len(wants))
	}
}

// sameJSONLines compares two JSON Lines texts value by value, by the
// fixtures' rules (fixtures/envelope/README.md): spacing and key order do
// not count, and of an error only its code and line (its message must not
// be empty).
func sameJSONLines(t *testing.T, a, b string) bool {
	t.Helper()
	norm := func(s string) string {
		var out []string
		for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
			if strings.TrimSpace(l) == "" {
				continue
			}
			var v any
			if err := json.Unmarshal([]byte(l), &v); err != nil {
				t.Fatalf("bad JSON line %q: %v", l, err)
			}
			if m, ok := v.(map[string]any); ok {
				if e, ok := m["error"].(map[string]any); ok {
					if msg, _ := e["message"].(string); msg == "" {
						t.Errorf("error without a message: %s", l)
					}
					delete(e, "message")
				}
			}
			b, _ := json.Marshal(v)
			out = append(out, string(b))
		}
		return strings.Join(out, "\n")
	}
	return norm(a) == norm(b)
}
