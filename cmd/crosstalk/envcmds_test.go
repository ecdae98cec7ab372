package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/fixtures"
)

// runCLI runs the command in-process and returns stdout, stderr and the
// exit code.
func runCLI(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return out.String(), errb.String(), code
}

// jsonLines decodes JSON Lines; error objects keep only code and line.
func jsonLines(t *testing.T, s string) []any {
	t.Helper()
	var out []any
	for _, line := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var v any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("bad JSON line %q: %v", line, err)
		}
		if m, ok := v.(map[string]any); ok {
			if e, ok := m["error"].(map[string]any); ok {
				if msg, _ := e["message"].(string); msg == "" {
					t.Errorf("error object without a message: %s", line)
				}
				delete(e, "message")
			}
		}
		out = append(out, v)
	}
	return out
}

// TestParseJSONContract runs `crosstalk parse --json` (and --strict) on every
// fixture file and checks the JSON Lines contract of docs/design.md §3.4 and the exit
// code: 0 when every envelope parsed, 1 when any failed.
func TestParseJSONContract(t *testing.T) {
	names, err := fixtures.Envelopes()
	if err != nil || len(names) == 0 {
		t.Fatalf("fixtures.Envelopes() = %v, %v", names, err)
	}
	dir := t.TempDir()
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			in, _ := fixtures.FS.ReadFile("envelope/" + name + ".txt")
			path := filepath.Join(dir, name+".txt")
			if err := os.WriteFile(path, in, 0o644); err != nil {
				t.Fatal(err)
			}
			for _, strict := range []bool{false, true} {
				wantFile := "envelope/" + name + ".jsonl"
				args := []string{"parse", "--json", path}
				if strict {
					args = []string{"parse", "--strict", path, "--json"}
					if _, err := fixtures.FS.ReadFile("envelope/" + name + ".strict.jsonl"); err == nil {
						wantFile = "envelope/" + name + ".strict.jsonl"
					}
				}
				wantText, _ := fixtures.FS.ReadFile(wantFile)
				want := jsonLines(t, string(wantText))
				stdout, stderr, code := runCLI(t, "", args...)
				got := jsonLines(t, stdout)
				if !reflect.DeepEqual(got, want) {
					t.Errorf("crosstalk %s =\n%s\nwant\n%s", strings.Join(args, " "), stdout, wantText)
				}
				wantCode := 0
				for _, v := range want {
					if _, isErr := v.(map[string]any)["error"]; isErr {
						wantCode = 1
					}
				}
				if code != wantCode {
					t.Errorf("crosstalk %s exit = %d, want %d (stderr %q)", strings.Join(args, " "), code, wantCode, stderr)
				}
			}
		})
	}
}

func TestParseReadsStdin(t *testing.T) {
	in := "hi\n[[A→B v1]]\nintent: ACK\nbody: |\n  ok\n[[END]]\n"
	out, _, code := runCLI(t, in, "parse", "--json")
	if code != 0 || !strings.Contains(out, `"from":"A"`) || !strings.Contains(out, `"line":2`) {
		t.Errorf("parse --json < stdin = %q, %d", out, code)
	}
	out, _, code = runCLI(t, in, "parse")
	if code != 0 || !strings.Contains(out, "<stdin>:2: A → B  ACK") {
		t.Errorf("parse < stdin = %q, %d", out, code)
	}
}

func TestUsageErrors(t *testing.T) {
	tests := [][]string{
		{},
		{"nosuchcommand"},
		{"parse", "--nosuchflag"},
		{"new", "--from", "A"},
		{"new", "--from", "A", "--to", "B"},
		{"reply"},
	}
	for _, args := range tests {
		stdout, stderr, code := runCLI(t, "", args...)
		if code != 2 {
			t.Errorf("crosstalk %v exit = %d, want 2", args, code)
		}
		if len(args) > 0 && !strings.HasPrefix(stderr, "crosstalk: error: ") {
			t.Errorf("crosstalk %v stderr = %q, want crosstalk: error: …", args, stderr)
		}
		// The usage is for --help; `crosstalk parse --jsno f > out.jsonl`
		// must not fill out.jsonl with it.
		if stdout != "" {
			t.Errorf("crosstalk %v stdout = %q, want nothing", args, stdout)
		}
	}
	for _, cmd := range []string{"parse", "fmt", "new", "reply", "validate", "relay", "send", "log", "inbox", "ack", "claim", "discharge"} {
		out, _, code := runCLI(t, "", cmd, "--help")
		if code != 0 || !strings.HasPrefix(out, "usage: crosstalk "+cmd) {
			t.Errorf("crosstalk %s --help = %d %q", cmd, code, out)
		}
	}
	if _, _, code := runCLI(t, "", "parse", filepath.Join(t.TempDir(), "missing.txt")); code != 1 {
		t.Errorf("parse of a missing file exit = %d, want 1", code)
	}
}

// TestRelayURLUsage: a --relay (or $CROSSTALK_RELAY) without http:// is a
// usage error at once, not retries against a URL that cannot work
// followed by "is the relay running?".
func TestRelayURLUsage(t *testing.T) {
	t.Setenv("CROSSTALK_RELAY", "")
	start := time.Now()
	for _, args := range [][]string{
		{"send", "--relay", "127.0.0.1:7777"},
		{"log", "--relay", "localhost:7777"},
		{"inbox", "--agent", "claude", "--relay", "htp://127.0.0.1:7777"},
		{"ack", "--agent", "claude", "--relay", "http://", "01M80ZE85N0YRPSJ6Z7H0NVPCX"},
		{"watch", "--relay", "127.0.0.1:7777", t.TempDir()},
		{"send", "--relay="},
		{"log", "--relay", ""},
		{"inbox", "--agent", "claude", "--relay="},
	} {
		stdout, stderr, code := runCLI(t, "[[A→B v1]]\nintent: REQUEST\n\nbody: |\n  hi\nsig: none\n[[END]]\n", args...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, "--relay") || !strings.Contains(stderr, "http://127.0.0.1:7777") {
			t.Errorf("crosstalk %v = %d, stdout %q, stderr %q; want 2 and a usage error naming --relay", args, code, stdout, stderr)
		}
	}
	t.Setenv("CROSSTALK_RELAY", "127.0.0.1:7777")
	if _, stderr, code := runCLI(t, "", "log"); code != 2 || !strings.Contains(stderr, "$CROSSTALK_RELAY") {
		t.Errorf("crosstalk log with CROSSTALK_RELAY=127.0.0.1:7777 = %d, %q; want 2 naming $CROSSTALK_RELAY", code, stderr)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("bad relay URLs took %v to refuse, want no retries", d)
	}
}

func TestNewReplyValidateFmt(t *testing.T) {
	out, stderr, code := runCLI(t, "first line\r\nsecond line\r\n\r\n", "new", "--from", "CLAUDE", "--to", "CHATGPT",
		"--intent", "question", "--context", "deploy", "--meta", "routing.X-Priority=high", "--meta", "routing.X-Reply-To=claude://s/1", "--meta", "privacy.PII=none")
	if code != 0 {
		t.Fatalf("new = %d %s", code, stderr)
	}
	e, err := envelope.Unmarshal([]byte(out))
	if err != nil {
		t.Fatalf("new output does not parse strictly: %v\n%s", err, out)
	}
	if e.Intent != "REQUEST" || e.Body != "first line\nsecond line" || !envelope.IsULID(e.Thread) || !envelope.IsULID(e.Message) || e.Sig != "none" || len(e.Meta) != 2 || len(e.Meta[0].Fields) != 2 {
		t.Errorf("new = %+v", e)
	}
	if b, _ := envelope.Marshal(e); string(b) != out {
		t.Errorf("new output is not canonical:\n%s\nwant\n%s", out, b)
	}
	path := filepath.Join(t.TempDir(), "q.txt")
	os.WriteFile(path, []byte("chat before\n"+out+"chat after\n"), 0o644)

	reply, stderr, code := runCLI(t, "the answer\n", "reply", "--intent", "RESPOND", path)
	if code != 0 {
		t.Fatalf("reply = %d %s", code, stderr)
	}
	r, err := envelope.Unmarshal([]byte(reply))
	if err != nil || r.From != "CHATGPT" || r.To != "CLAUDE" || r.Parent != e.Message || r.Thread != e.Thread || r.Body != "the answer" || r.Message == e.Message {
		t.Errorf("reply = %+v, %v", r, err)
	}

	both := reply + "\n" + "[[X→Y v1]]\nintent: REQUEST\nintent: REQUEST\nbody: |\n  x\n[[END]]\n"
	vout, _, code := runCLI(t, both, "validate")
	lines := strings.Split(strings.TrimSpace(vout), "\n")
	if code != 1 || len(lines) != 2 || !strings.Contains(lines[0], ": ok CHATGPT→CLAUDE RESPOND") || !strings.Contains(lines[1], ":17: E-FORMAT: duplicate field") {
		t.Errorf("validate = %d\n%s", code, vout)
	}
	if _, stderr, code := runCLI(t, "nothing here", "validate"); code != 1 || !strings.Contains(stderr, "no envelope found") {
		t.Errorf("validate of no envelope = %d %q", code, stderr)
	}

	// fmt is idempotent and drops chat text; --fence wraps each envelope.
	f1, _, code := runCLI(t, "noise\n> "+strings.ReplaceAll(strings.TrimSuffix(out, "\n"), "\n", "\n> ")+"\nmore noise\n"+reply, "fmt")
	f2, _, _ := runCLI(t, f1, "fmt")
	if code != 0 || f1 != f2 || f1 != out+"\n"+reply {
		t.Errorf("fmt =\n%s\nfmt(fmt) =\n%s", f1, f2)
	}
	fenced, _, _ := runCLI(t, out, "fmt", "--fence")
	if !strings.HasPrefix(fenced, "```\n[[CLAUDE→CHATGPT v1]]") || !strings.HasSuffix(fenced, "[[END]]\n```\n") {
		t.Errorf("fmt --fence = %q", fenced)
	}
}

// TestReplyNamesTheInput: when reply cannot reply, its error names the
// file and, for a malformed envelope, the line, as validate does.
func TestReplyNamesTheInput(t *testing.T) {
	dir := t.TempDir()
	good := "[[A→B v1]]\nintent: REQUEST\n\nbody: |\n  hi\nsig: none\n[[END]]\n"
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name string
		path string
		want string
	}{
		{"bad UTF-8", write("bad utf8.txt", strings.Replace(good, "hi", "h\xffi", 1)), "bad utf8.txt:5: E-FORMAT: "},
		{"second malformed", write("two.txt", good+"\n"+strings.Replace(good, "intent: REQUEST", "intent REQUEST", 1)), "two.txt:10: E-FORMAT: "},
		{"empty", write("empty.txt", ""), "empty.txt: no envelope found"},
	}
	for _, tt := range tests {
		stdout, stderr, code := runCLI(t, "", "reply", "--intent", "RESPOND", "--body", "x", tt.path)
		if code != 1 || stdout != "" || !strings.Contains(stderr, tt.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%s: reply = %d, stdout %q, stderr %q; want 1 and one line with %q", tt.name, code, stdout, stderr, tt.want)
		}
	}
}

// TestParseSummaryCutsWholeCharacters: parse shortens a long first body
// line at a character boundary, never printing part of one ("\xc3...").
func TestParseSummaryCutsWholeCharacters(t *testing.T) {
	for _, body := range []string{strings.Repeat("é", 40), "a" + strings.Repeat("€", 30), strings.Repeat("😀", 20)} {
		text := "[[A→B v1]]\nintent: REQUEST\n\nbody: |\n  " + body + "\nsig: none\n[[END]]\n"
		out, stderr, code := runCLI(t, text, "parse")
		if code != 0 {
			t.Fatalf("parse = %d %q", code, stderr)
		}
		_, line, _ := strings.Cut(out, "  body:")
		line, _, _ = strings.Cut(line, "\n")
		if strings.Contains(line, `\x`) || !strings.HasSuffix(line, `..."`) {
			t.Errorf("parse body summary of %q = %q, want whole characters and ...", body, line)
		}
	}
}

// TestNoEnvelopeNamesInputs: every command that reads envelopes says
// which input held none.
func TestNoEnvelopeNamesInputs(t *testing.T) {
	c := newSignCLI(t)
	c.must("", "keygen", "--pkid", "alice", "--out", c.path("a.key"))
	empty := c.path("empty file.txt")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"parse"}, {"fmt"}, {"validate"}, {"verify", "--trust", c.path("known_keys")}, {"sign", "--key", c.path("a.key")},
	} {
		for _, in := range []struct{ file, want string }{
			{empty, "no envelope found in " + empty + "\n"},
			{"", "no envelope found in <stdin>\n"},
		} {
			a := args
			if in.file != "" {
				a = append(slices.Clone(args), in.file)
			}
			_, _, stderr := c.run("", a...)
			if !strings.HasSuffix(stderr, in.want) || strings.Count(stderr, "\n") != 1 {
				t.Errorf("crosstalk %v: stderr %q, want one line ending %q", a, stderr, in.want)
			}
		}
	}
}
