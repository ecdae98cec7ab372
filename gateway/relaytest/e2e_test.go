package relaytest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/internal/syncbuf"
	"github.com/crosstalk-go/crosstalk/internal/xvfbtest"
	"github.com/crosstalk-go/crosstalk/transports/mail/mailtest"
)

// e2eDeadline bounds each wait of the end-to-end tests.
const e2eDeadline = 60 * time.Second

// e2eClient reads the relays' APIs; a relay that stops answering fails the
// test instead of hanging it.
var e2eClient = &http.Client{Timeout: 10 * time.Second}

// e2eProc is a child process: a `crosstalk relay` or `crosstalk watch`.
type e2eProc struct {
	name   string
	cmd    *exec.Cmd
	url    string // a relay's base URL
	stdout *syncbuf.Buffer
	stderr *syncbuf.Buffer
	done   chan error // the result of Wait
}

// e2eEnv is the environment of a child whose home is dir/home: every user
// directory (config, data, cache — the clipboard state file) is its own.
func e2eEnv(dir string, extra ...string) []string {
	home := filepath.Join(dir, "home")
	env := append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
		"XDG_DATA_HOME="+filepath.Join(home, ".local", "share"), "XDG_CACHE_HOME="+filepath.Join(home, ".cache"))
	return append(env, extra...)
}

// startProc starts bin with args and env; t.Cleanup kills it by its pid.
func startProc(t *testing.T, name, bin string, env []string, args ...string) *e2eProc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	p := &e2eProc{name: name, cmd: cmd, stdout: &syncbuf.Buffer{}, stderr: &syncbuf.Buffer{}, done: make(chan error, 1)}
	cmd.Stdout = p.stdout
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s (%s %s): %v", name, bin, strings.Join(args, " "), err)
	}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		p.wait(t)
	})
	return p
}

// startRelayProc starts `crosstalk relay --config config --data dir/data`
// on a free loopback port and waits for its "relay listening" line.
func startRelayProc(t *testing.T, name, bin, dir, config string, extraEnv ...string) *e2eProc {
	t.Helper()
	p := startProc(t, name, bin, e2eEnv(dir, extraEnv...), "relay", "--config", config, "--data", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0")
	deadline := time.Now().Add(e2eDeadline)
	for p.url == "" {
		if m := listeningURL.FindStringSubmatch(p.stderr.String()); m != nil {
			p.url = m[1]
			break
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("relay %s exited before listening (%v):\n%s", name, err, p.stderr)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("relay %s did not log \"relay listening\" within %v:\n%s", name, e2eDeadline, p.stderr)
		}
	}
	return p
}

// wait waits (bounded) for the process to end and returns its Wait error.
func (p *e2eProc) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-p.done:
		p.done <- err
		return err
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		t.Errorf("%s did not exit within 30 s", p.name)
		return nil
	}
}

// stop sends SIGTERM and requires a clean exit.
func (p *e2eProc) stop(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.wait(t); err != nil {
		t.Errorf("%s after SIGTERM: %v, want exit 0; log:\n%s", p.name, err, p.stderr)
	}
}

// events returns a group's events (every page) from a relay's API; none
// when the group does not exist yet.
func (p *e2eProc) events(t *testing.T, group string) []ledger.Event {
	t.Helper()
	var out []ledger.Event
	var since int64
	for page := 0; page < 100; page++ {
		res, err := e2eClient.Get(fmt.Sprintf("%s/v1/groups/%s/events?since_seq=%d&limit=500", p.url, group, since))
		if err != nil {
			t.Fatalf("GET %s events of %s = %v", p.name, group, err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode == http.StatusNotFound {
			return nil
		}
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s events of %s = %d %s, want 200", p.name, group, res.StatusCode, body)
		}
		var pg struct{ Events []ledger.Event }
		if err := json.Unmarshal(body, &pg); err != nil {
			t.Fatalf("GET %s events of %s: %v", p.name, group, err)
		}
		if len(pg.Events) == 0 {
			return out
		}
		out = append(out, pg.Events...)
		since = pg.Events[len(pg.Events)-1].Seq
	}
	t.Fatalf("GET %s events of %s: more than 100 pages", p.name, group)
	return nil
}

// e2eData decodes an event's data or fails the test.
func e2eData(t *testing.T, ev ledger.Event) gateway.EventData {
	t.Helper()
	d, err := gateway.ParseData(ev)
	if err != nil {
		t.Fatalf("ParseData(%s %s) = %v", ev.Kind, ev.ID, err)
	}
	return d
}

// messagesOf returns the chat.message events that record message id m.
func messagesOf(t *testing.T, evs []ledger.Event, m string) []ledger.Event {
	t.Helper()
	var out []ledger.Event
	for _, ev := range evs {
		if ev.Kind != gateway.KindMessage {
			continue
		}
		if d := e2eData(t, ev); d.X != nil && d.X.Envelope != nil && d.X.Envelope.Message == m {
			out = append(out, ev)
		}
	}
	return out
}

// deliveriesOf returns the x.crosstalk.delivery events for event id.
func deliveriesOf(t *testing.T, evs []ledger.Event, id string) []gateway.EventData {
	t.Helper()
	var out []gateway.EventData
	for _, ev := range evs {
		if ev.Kind != gateway.KindDelivery {
			continue
		}
		if d := e2eData(t, ev); d.EventID == id {
			out = append(out, d)
		}
	}
	return out
}

// waitFor polls cond every 100 ms until it holds, failing after
// e2eDeadline with what.
func waitFor(t *testing.T, what string, cond func() bool, logs func() string) {
	t.Helper()
	deadline := time.Now().Add(e2eDeadline)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v\n%s", what, e2eDeadline, logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// runCLI runs the crosstalk binary to completion (bounded) and returns
// its standard output.
func runCLI(t *testing.T, bin string, env []string, stdin []byte, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("crosstalk %s: %v", strings.Join(args, " "), err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("crosstalk %s = %v, want success; stderr:\n%s", strings.Join(args, " "), err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("crosstalk %s did not finish within 30 s", strings.Join(args, " "))
	}
	return stdout.Bytes()
}

// recordedLines returns the relay log lines "envelope recorded" for
// message m.
func recordedLines(log, m string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if l := sc.Text(); strings.Contains(l, `msg="envelope recorded"`) && strings.Contains(l, "message="+m) {
			out = append(out, l)
		}
	}
	return out
}

// TestEndToEnd sends one signed envelope the long way round (issue 5
// item 6): the user copies it to the clipboard of a private Xvfb; relay A
// (a `crosstalk relay` child watching the clipboard) records it and, as
// its receiver GEMINI is routed over mail, mails it through a real Dovecot
// submission server and Postfix into relay B's mailbox; relay B reads it
// over IMAP (IDLE) and, GEMINI being a folder agent there, writes it to
// its outbox; `crosstalk watch --relay C` picks the file up and posts it
// to relay C over HTTP. At every relay the envelope is recorded once,
// first-use verified (each relay has its own fresh trust store), with the
// raw text byte for byte what was signed; A and B record one delivered
// x.crosstalk.delivery event each; and nothing is left to go round again
// (the mail is flagged processed, the file moved to processed/).
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds crosstalk and runs relays, Xvfb, Dovecot and Postfix")
	}
	// Check both before starting either.
	xvfbtest.Need(t, "Xvfb", "xauth", "xclip")
	mailtest.Require(t)

	bin := crosstalkBinary(t)
	xvfbtest.Start(t) // DISPLAY for this process and so for its children
	ms := mailtest.StartT(t)
	root := t.TempDir()
	// The relays verify the servers' self-signed certificate through the
	// system roots, which SSL_CERT_FILE replaces: STARTTLS is required,
	// not skipped.
	certFile := filepath.Join(root, "mail-ca.pem")
	if err := os.WriteFile(certFile, ms.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	userA, userB := ms.NewUser(), ms.NewUser()

	// The signed envelope, made by the CLI as a user would. The body holds
	// what mail likes to change: non-ASCII, trailing blanks, a line longer
	// than 76 characters, a line starting "From ".
	keyDir := filepath.Join(root, "keys")
	userEnv := e2eEnv(keyDir)
	key := filepath.Join(keyDir, "claude.key")
	if err := os.MkdirAll(keyDir, 0o700); err != nil {
		t.Fatal(err)
	}
	runCLI(t, bin, userEnv, nil, "keygen", "--pkid", "claude@example.test", "--out", key)
	body := "Please review PR 42 — Ünïcödé.   \n" + strings.Repeat("long line ", 20) + "\nFrom here on, the end.\n"
	plain := runCLI(t, bin, userEnv, []byte(body), "new", "--from", "CLAUDE", "--to", "GEMINI", "--intent", "REQUEST", "--context", "e2e")
	signed := runCLI(t, bin, userEnv, plain, "sign", "--key", key, "--announce")
	var meta struct{ Message string }
	if err := json.Unmarshal(runCLI(t, bin, userEnv, signed, "parse", "--json"), &meta); err != nil || meta.Message == "" {
		t.Fatalf("crosstalk parse --json of the signed envelope: message %q, %v", meta.Message, err)
	}
	msgID := meta.Message
	wantRaw := string(signed) // with its final newline, as the Reader keeps it

	dirA, dirB, dirC := filepath.Join(root, "a"), filepath.Join(root, "b"), filepath.Join(root, "c")
	writeConfig := func(dir, toml string) string {
		t.Helper()
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(dir, "relay.toml")
		toml = fmt.Sprintf("log_level = \"info\"\ntrust_file = %q\n", filepath.Join(dir, "known_keys")) + toml
		if err := os.WriteFile(f, []byte(toml), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	cfgA := writeConfig(dirA, fmt.Sprintf(`name = "RELAY-A"

[clipboard]
watch = true

[mail]
smtp = %q
smtp_security = "require-starttls"
username = %q
password = %q
from = %q

[[agents]]
id = "gemini"
names = ["GEMINI"]
transport = "mail"
address = %q
`, ms.SubmissionAddr, userA, mailtest.Password, mailtest.Address(userA), mailtest.Address(userB)))
	cfgB := writeConfig(dirB, fmt.Sprintf(`name = "RELAY-B"

[mail]
imap = %q
imap_security = "require-starttls"
username = %q
password = %q

[[agents]]
id = "gemini"
names = ["GEMINI"]
transport = "folder"
address = "gemini"
`, ms.IMAPAddr, userB, mailtest.Password))
	cfgC := writeConfig(dirC, `name = "RELAY-C"`+"\n")

	relayC := startRelayProc(t, "relay C", bin, dirC, cfgC)
	relayB := startRelayProc(t, "relay B", bin, dirB, cfgB, "SSL_CERT_FILE="+certFile)
	relayA := startRelayProc(t, "relay A", bin, dirA, cfgA, "SSL_CERT_FILE="+certFile)
	outboxB := filepath.Join(dirB, "data", "outbox", "gemini")
	if err := os.MkdirAll(outboxB, 0o700); err != nil {
		t.Fatal(err)
	}
	watch := startProc(t, "crosstalk watch", bin, e2eEnv(filepath.Join(root, "w")),
		"watch", "--relay", relayC.url, "--settle", "200ms", "--rescan", "1s", "--log-level", "info", outboxB)
	procs := []*e2eProc{relayA, relayB, watch, relayC}
	logs := func() string {
		var b strings.Builder
		for _, p := range procs {
			fmt.Fprintf(&b, "--- %s stderr\n%s--- %s stdout\n%s", p.name, p.stderr, p.name, p.stdout)
		}
		return b.String() + ms.Logs()
	}

	// The user copies the envelope.
	if err := xvfbtest.Put(t, signed); err != nil {
		t.Fatalf("xvfbtest.Put(signed envelope) = %v", err)
	}

	var atC []ledger.Event
	waitFor(t, "the envelope reaching relay C", func() bool {
		atC = messagesOf(t, relayC.events(t, "e2e"), msgID)
		return len(atC) > 0
	}, logs)

	// Every hop in the ledgers: the recorded message, its transport and
	// verification, the raw text, and (A, B) its delivery onward.
	type hop struct {
		relay     *e2eProc
		transport string
		onward    string // delivered via; "" for the last relay
	}
	for _, h := range []hop{{relayA, "clipboard", "mail"}, {relayB, "mail", "folder"}, {relayC, "http", ""}} {
		var evs, msgs []ledger.Event
		var dels []gateway.EventData
		waitFor(t, h.relay.name+" recording the envelope and its delivery", func() bool {
			evs = h.relay.events(t, "e2e")
			msgs = messagesOf(t, evs, msgID)
			if len(msgs) == 0 {
				return false
			}
			dels = deliveriesOf(t, evs, msgs[0].ID)
			return h.onward == "" || len(dels) > 0
		}, logs)
		if len(msgs) != 1 {
			t.Errorf("%s: message %s recorded %d times, want once", h.relay.name, msgID, len(msgs))
		}
		x := e2eData(t, msgs[0]).X
		if x.Transport != h.transport {
			t.Errorf("%s: transport = %q, want %q", h.relay.name, x.Transport, h.transport)
		}
		if x.Verification != "first-use" || !x.Verified || x.Pkid != "claude@example.test" {
			t.Errorf("%s: verification = %q verified=%v pkid=%q, want first-use true claude@example.test", h.relay.name, x.Verification, x.Verified, x.Pkid)
		}
		if x.Sender != "claude" {
			t.Errorf("%s: sender = %q, want claude", h.relay.name, x.Sender)
		}
		if x.Raw != wantRaw {
			t.Errorf("%s: raw = %q, want the signed text byte for byte %q", h.relay.name, x.Raw, wantRaw)
		}
		switch {
		case h.onward == "" && len(dels) != 0:
			t.Errorf("%s: delivery events %+v, want none (no routed agent)", h.relay.name, dels)
		case h.onward != "" && len(dels) != 1:
			t.Errorf("%s: %d delivery events %+v, want 1", h.relay.name, len(dels), dels)
		case h.onward != "":
			if d := dels[0]; d.State != "delivered" || d.ActorID != "gemini" || !strings.Contains(d.Message, "via "+h.onward+" ") {
				t.Errorf("%s: delivery = state %q actor %q %q, want delivered to gemini via %s", h.relay.name, d.State, d.ActorID, d.Message, h.onward)
			}
		}
	}

	// Nothing left to go round again: one mail in B's mailbox, flagged
	// processed; no mail in A's; one file, in processed/.
	waitFor(t, "relay B flagging the mail processed", func() bool {
		msgs, err := ms.Messages(userB, "")
		return err == nil && len(msgs) == 1 && msgs[0].HasFlag("$CrosstalkProcessed")
	}, logs)
	if msgs, err := ms.Messages(userA, ""); err != nil || len(msgs) != 0 {
		t.Errorf("Messages(%s) = %d messages, %v; want none (nothing bounced)", userA, len(msgs), err)
	}
	waitFor(t, "watch moving the file to processed/", func() bool {
		done, _ := filepath.Glob(filepath.Join(outboxB, "processed", "*.crosstalk"))
		left, _ := filepath.Glob(filepath.Join(outboxB, "*.crosstalk"))
		return len(done) == 1 && len(left) == 0
	}, logs)
	if failed, _ := filepath.Glob(filepath.Join(outboxB, "failed", "*")); len(failed) != 0 {
		t.Errorf("watch failed/ = %v, want empty", failed)
	}
	if got := watch.stdout.String(); strings.Count(got, "\n") != 1 || !strings.Contains(got, msgID) {
		t.Errorf("watch output = %q, want one receipt line for %s", got, msgID)
	}

	// The text that arrived at C still verifies, for anyone: a fresh
	// trust store pins the announced key on first use.
	x := e2eData(t, atC[0]).X
	var v struct{ Status, Pkid string }
	if err := json.Unmarshal(runCLI(t, bin, e2eEnv(filepath.Join(root, "v")), []byte(x.Raw), "verify", "--json"), &v); err != nil || v.Status != "first-use" {
		t.Errorf("crosstalk verify --json (C's raw) = %+v, %v; want status first-use", v, err)
	}

	for _, p := range procs {
		p.stop(t)
	}
	// Counted once the relays have exited and their logs are whole: a
	// relay logs "envelope recorded" after the ledger has it, so a read
	// of the log as soon as the event shows in the ledger can be early
	// (relay C, whose hop ends there, under load: 0 lines).
	for _, p := range []*e2eProc{relayA, relayB, relayC} {
		if n := len(recordedLines(p.stderr.String(), msgID)); n != 1 {
			t.Errorf("%s: %d \"envelope recorded\" log lines for %s, want 1 (it arrived more than once)", p.name, n, msgID)
		}
	}
	if t.Failed() {
		t.Logf("logs:\n%s", logs())
	}
}
