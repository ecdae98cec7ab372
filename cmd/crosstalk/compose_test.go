package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/internal/v10peer"
)

var sessionForm = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}Z [0-9a-f]{6}$`)

// TestNewUserAndSession checks where new and reply take the user: line
// from (--user, the config's user, the OS user) and that both write a
// session in the spec's form.
func TestNewUserAndSession(t *testing.T) {
	c := newSignCLI(t)
	newEnv := func(args ...string) *envelope.Envelope {
		t.Helper()
		out := c.must("", append([]string{"new", "--from", "A", "--to", "B", "--intent", "REQUEST", "--body", "hi"}, args...)...)
		e, err := envelope.Unmarshal([]byte(out))
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if (len(args) == 0 || args[0] != "--session") && !sessionForm.MatchString(e.Session) {
			t.Errorf("session %q is not the hour and a random id", e.Session)
		}
		return e
	}
	if e := newEnv(); e.User != osUser() || e.User == "" || !sessionForm.MatchString(e.Session) {
		t.Errorf("user = %q, want the OS user %q", e.User, osUser())
	}
	cfg := filepath.Join(c.dir, "config", "crosstalk", "config.toml")
	os.MkdirAll(filepath.Dir(cfg), 0o700)
	os.WriteFile(cfg, []byte(`user = "kalle"`+"\n"), 0o600)
	if e := newEnv(); e.User != "kalle" {
		t.Errorf("user = %q, want the config's kalle", e.User)
	}
	if e := newEnv("--user", "ada"); e.User != "ada" {
		t.Errorf("user = %q, want --user ada", e.User)
	}
	other := filepath.Join(c.dir, "other.toml")
	os.WriteFile(other, []byte(`user = "grace"`+"\n"), 0o600)
	if e := newEnv("--config", other); e.User != "grace" {
		t.Errorf("user = %q, want grace from --config", e.User)
	}
	if code, _, errs := c.run("", "new", "--from", "A", "--to", "B", "--intent", "REQUEST", "--body", "x", "--config", filepath.Join(c.dir, "missing.toml")); code != 1 || !strings.Contains(errs, "missing.toml") {
		t.Errorf("a named config that is missing = exit %d, %s", code, errs)
	}
	if e := newEnv("--session", "s-1"); e.Session != "s-1" {
		t.Errorf("--session = %q", e.Session)
	}

	orig := newEnv("--user", "ada")
	path := filepath.Join(c.dir, "orig.txt")
	b, _ := envelope.Marshal(orig)
	os.WriteFile(path, b, 0o600)
	out := c.must("", "reply", "--intent", "RESPOND", "--body", "ok", path)
	r, err := envelope.Unmarshal([]byte(out))
	if err != nil || r.User != "kalle" || r.Session != orig.Session {
		t.Errorf("reply user %q session %q (%v), want kalle and the original's session %q", r.User, r.Session, err, orig.Session)
	}
	out = c.must("", "reply", "--intent", "RESPOND", "--body", "ok", "--compat", "v1.0", path)
	if err := v10peer.CheckGrammar([]byte(out)); err != nil || !strings.Contains(out, "\nintent: ANSWER\n") || !strings.Contains(out, "\nparent: "+orig.Message+"\n") {
		t.Errorf("reply --compat v1.0 (%v):\n%s", err, out)
	}
}

func TestNewCompatV10(t *testing.T) {
	c := newSignCLI(t)
	base := []string{"new", "--from", "CLAUDE", "--to", "CHATGPT", "--user", "kalle", "--context", "deploy", "--body", "first\n\nthird"}
	tests := []struct {
		args       []string
		wantIntent string // "" means refused, exit 1
	}{
		{[]string{"--intent", "REQUEST"}, "QUESTION"},
		{[]string{"--intent", "respond"}, "ANSWER"},
		{[]string{"--intent", "QUESTION"}, "QUESTION"},
		{[]string{"--intent", "NOTE"}, "NOTE"},
		{[]string{"--intent", "ACK"}, ""},
		{[]string{"--intent", "BROADCAST"}, ""},
		{[]string{"--intent", "REQUEST", "--meta", "routing.X-Priority=high"}, ""},
		{[]string{"--intent", "REQUEST", "--meta", "routing.X-Priority=high", "--lossy"}, "QUESTION"},
	}
	for _, tt := range tests {
		args := append(append(append([]string{}, base...), tt.args...), "--compat", "v1.0")
		code, out, errs := c.run("", args...)
		if tt.wantIntent == "" {
			if code != 1 || out != "" || !strings.Contains(errs, "v1.0") {
				t.Errorf("%v = exit %d, %q, %q; want refused", tt.args, code, out, errs)
			}
			continue
		}
		if code != 0 {
			t.Errorf("%v = exit %d: %s", tt.args, code, errs)
			continue
		}
		if err := v10peer.CheckGrammar([]byte(out)); err != nil {
			t.Errorf("%v: v1.0 grammar: %v\n%s", tt.args, err, out)
		}
		if !strings.Contains(out, "\nintent: "+tt.wantIntent+"\n") || strings.Contains(out, "meta:") {
			t.Errorf("%v wrote\n%s", tt.args, out)
		}
		e, err := envelope.Unmarshal([]byte(out))
		if err != nil || e.Body != "first\n\nthird" || !envelope.IsULID(e.Thread) {
			t.Errorf("%v: our reader: %+v, %v", tt.args, e, err)
		}
	}
	for _, bad := range [][]string{{"--compat", "v2"}, {"--lossy"}} {
		if code, _, _ := c.run("", append(append(append([]string{}, base...), "--intent", "REQUEST"), bad...)...); code != 2 {
			t.Errorf("%v = exit %d, want a usage error", bad, code)
		}
	}
}

// TestV10PeerReadsOurOutput runs the original v1.0 parser on what new,
// reply and sign write, by default and with --compat v1.0.
func TestV10PeerReadsOurOutput(t *testing.T) {
	peer := v10peer.Setup(t)
	c := newSignCLI(t)
	c.must("", "keygen", "--pkid", "alice@example.com", "--out", c.path("alice.key"))
	// Not a body line starting "sig:": the v1.0 parser ends the body at
	// the first one (docs/format.md "Writing for v1.0 readers").
	body := "Line one.\n\n  indented line\n→ Café"
	newArgs := []string{"new", "--from", "CLAUDE", "--to", "CHATGPT", "--user", "kalle", "--intent", "REQUEST", "--context", "deploy", "--body", body}
	def := c.must("", newArgs...)
	compat := c.must("", append(newArgs, "--compat", "v1.0")...)
	os.WriteFile(c.path("q.txt"), []byte(def), 0o600)
	reply := c.must("", "reply", "--intent", "RESPOND", "--body", "Fine.", c.path("q.txt"))
	cases := []struct {
		name, text   string
		exactSession bool
	}{
		{"default", def, false},
		{"default signed", c.must(def, "sign", "--key", c.path("alice.key")), false},
		{"default signed with announce", c.must(def, "sign", "--key", c.path("alice.key"), "--announce"), false},
		{"reply", reply, false},
		{"compat v1.0", compat, true},
		{"compat v1.0 signed", c.must(compat, "sign", "--key", c.path("alice.key")), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, err := envelope.Unmarshal([]byte(tc.text))
			if err != nil {
				t.Fatal(err)
			}
			got, err := peer.Parse([]byte(tc.text))
			if err != nil {
				t.Fatalf("v1.0 parser: %v\n%s", err, tc.text)
			}
			if got.From != e.From || got.To != e.To || got.Version != "1" || got.Response != e.Body {
				t.Errorf("v1.0 parser read %+v\nfrom\n%s", got, tc.text)
			}
			// The v1.0 parser takes everything up to the next context: or
			// intent: line as the session: in the v1.1 field order (the
			// spec's) the ids come first; in the v1.0 form it is exact.
			if !strings.HasPrefix(got.Session, e.Session) || tc.exactSession && got.Session != e.Session {
				t.Errorf("v1.0 parser session %q, ours %q", got.Session, e.Session)
			}
		})
	}
}

// TestComposeWithinReaderLimits: new and reply refuse, with nothing on
// stdout, a body that would make an envelope its readers refuse
// (docs/format.md §8), and write one just within the limits.
func TestComposeWithinReaderLimits(t *testing.T) {
	dir := t.TempDir()
	question := filepath.Join(dir, "q.txt")
	if err := os.WriteFile(question, []byte("[[A→B v1]]\nintent: REQUEST\n\nbody: |\n  hi\nsig: none\n[[END]]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	longLine := strings.Repeat("x", envelope.MaxLineLength)                                 // 64 KiB + the indent
	manyLines := strings.Repeat(strings.Repeat("y", 99)+"\n", envelope.MaxEnvelopeSize/101) // under 1 MiB; over it indented
	fits := strings.Repeat("z", envelope.MaxLineLength-2)
	tests := []struct {
		name, body string
		ok         bool
	}{
		{"line over 64 KiB", longLine, false},
		{"envelope over 1 MiB", manyLines, false},
		{"line of 64 KiB with its indent", fits, true},
	}
	for _, tt := range tests {
		body := filepath.Join(dir, "body.txt")
		if err := os.WriteFile(body, []byte(tt.body), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{
			{"new", "--from", "A", "--to", "B", "--intent", "REQUEST", "--body-file", body},
			{"reply", "--intent", "RESPOND", "--body-file", body, question},
		} {
			stdout, stderr, code := runCLI(t, "", args...)
			if tt.ok {
				if code != 0 {
					t.Errorf("%s: %s = %d %q, want 0", tt.name, args[0], code, stderr)
				} else if _, _, vcode := runCLI(t, stdout, "validate"); vcode != 0 {
					t.Errorf("%s: %s wrote an envelope validate refuses", tt.name, args[0])
				}
				continue
			}
			if code != 1 || stdout != "" || !strings.Contains(stderr, "E-TOO-LARGE") {
				t.Errorf("%s: %s = %d, %d bytes on stdout, stderr %q; want 1, nothing, E-TOO-LARGE", tt.name, args[0], code, len(stdout), stderr)
			}
		}
	}
}
