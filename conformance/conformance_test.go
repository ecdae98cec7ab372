package conformance_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/conformance"
)

func TestCompare(t *testing.T) {
	c := &conformance.Case{Name: "x", Expect: []json.RawMessage{
		json.RawMessage(`{"from":"A","to":"B","version":1,"intent":"REQUEST","body":"hi","complete":true,"line":2}`),
		json.RawMessage(`{"error":{"code":"E-FORMAT","line":9,"message":"duplicate field"}}`),
	}}
	tests := []struct {
		name, got, wantErr string
	}{
		{"equal, other key order and message", `{"line":2,"from":"A","to":"B","version":1,"intent":"REQUEST","body":"hi","complete":true}
{"error":{"code":"E-FORMAT","line":9,"message":"something else"}}
`, ""},
		{"blank lines ignored", "\n" + `{"from":"A","to":"B","version":1,"intent":"REQUEST","body":"hi","complete":true,"line":2}` + "\n\n" + `{"error":{"code":"E-FORMAT","line":9}}`, ""},
		{"wrong error line", `{"from":"A","to":"B","version":1,"intent":"REQUEST","body":"hi","complete":true,"line":2}
{"error":{"code":"E-FORMAT","line":10,"message":"x"}}`, "object 2: want error E-FORMAT at line 9, got E-FORMAT at line 10"},
		{"extra key", `{"from":"A","to":"B","version":1,"intent":"REQUEST","body":"hi","complete":true,"line":2,"user":""}
{"error":{"code":"E-FORMAT","line":9,"message":"x"}}`, `object 1: key "user" should be absent`},
		{"missing key", `{"from":"A","to":"B","version":1,"body":"hi","complete":true,"line":2}
{"error":{"code":"E-FORMAT","line":9,"message":"x"}}`, `object 1: key "intent" missing`},
		{"different value", `{"from":"A","to":"B","version":1,"intent":"REQUEST","body":"hi ","complete":true,"line":2}
{"error":{"code":"E-FORMAT","line":9,"message":"x"}}`, `object 1: key "body": want "hi", got "hi "`},
		{"too few", `{"from":"A","to":"B","version":1,"intent":"REQUEST","body":"hi","complete":true,"line":2}`, "object 2: missing"},
		{"too many", `{"from":"A","to":"B","version":1,"intent":"REQUEST","body":"hi","complete":true,"line":2}
{"error":{"code":"E-FORMAT","line":9,"message":"x"}}
{}`, "object 3: unexpected"},
		{"not JSON", "From: A → B", "object 1: not a JSON object"},
		{"error for envelope", `{"error":{"code":"E-FORMAT","line":2,"message":"x"}}
{"error":{"code":"E-FORMAT","line":9,"message":"x"}}`, "object 1: want an envelope from line 2, got error E-FORMAT at line 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := conformance.Compare(c, []byte(tt.got))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Compare = %v, want a match", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("Compare = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestParseRefusesBadManifests(t *testing.T) {
	for _, m := range []string{
		`{"version":2,"cases":[{"name":"a","expect":[]}]}`,
		`{"version":1,"cases":[]}`,
		`{"version":1,"cases":[{"name":"a","expect":[]},{"name":"a","expect":[]}]}`,
		`{"version":1,"cases":[{"name":"a","expect":[],"typo":1}]}`,
	} {
		if _, err := conformance.Parse([]byte(m)); err == nil {
			t.Errorf("Parse(%s) = nil error", m)
		}
	}
}

func TestRunMissingCommand(t *testing.T) {
	m, err := conformance.Default()
	if err != nil {
		t.Fatal(err)
	}
	_, err = conformance.Run(context.Background(), m, conformance.Options{Command: []string{"/nonexistent/parser"}})
	if !errors.Is(err, conformance.ErrCommand) {
		t.Errorf("Run = %v, want ErrCommand", err)
	}
}

func ExampleCompare() {
	c := &conformance.Case{Name: "legacy-question", Expect: []json.RawMessage{
		json.RawMessage(`{"from":"A","to":"B","version":1,"intent":"REQUEST","legacy_intent":"QUESTION","body":"hi","complete":true,"line":1}`),
	}}
	got := `{"from":"A","to":"B","version":1,"intent":"QUESTION","body":"hi","complete":true,"line":1}`
	fmt.Println(conformance.Compare(c, []byte(got)))
	// Output: object 1: key "intent": want "REQUEST", got "QUESTION"
}

// TestRunOutputBounded: a parser that prints more than MaxOutput fails
// with "printed more than", holding at most MaxOutput of it. Before, the
// command's output was read with bytes.Buffer.ReadFrom (io.Copy prefers
// it), past the limit: `crosstalk conformance -- yes` grew by hundreds of
// MB a second until the case's timeout.
func TestRunOutputBounded(t *testing.T) {
	m, err := conformance.Default()
	if err != nil {
		t.Fatal(err)
	}
	m.Cases = m.Cases[:1]
	results, err := conformance.Run(context.Background(), m, conformance.Options{
		Command:   []string{os.Args[0], "-test.run=^TestHelperFlood$"},
		Env:       append(os.Environ(), "CONFORMANCE_TEST_FLOOD=1"),
		MaxOutput: 1 << 10,
	})
	if err != nil {
		t.Fatal(err)
	}
	if r := results[0]; r.Err == nil || !strings.Contains(r.Err.Error(), "printed more than 1024 bytes") {
		t.Errorf("a parser printing 32 MiB: result %v, want printed more than 1024 bytes", r.Err)
	}
}

// TestHelperFlood is the parser of TestRunOutputBounded: it prints 32 MiB
// of one JSON-looking line.
func TestHelperFlood(t *testing.T) {
	if os.Getenv("CONFORMANCE_TEST_FLOOD") == "" {
		t.Skip("the parser run by TestRunOutputBounded")
	}
	line := []byte(strings.Repeat("x", 1<<20))
	for range 32 {
		if _, err := os.Stdout.Write(line); err != nil {
			os.Exit(1)
		}
	}
	os.Exit(0)
}
