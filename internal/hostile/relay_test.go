package hostile

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/internal/syncbuf"
	"github.com/crosstalk-go/crosstalk/signing"
)

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// crosstalkBinary builds cmd/crosstalk once per test binary.
func crosstalkBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		var err error
		if binDir, err = os.MkdirTemp("", "crosstalk-hostile-"); err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(binDir, "crosstalk")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/crosstalk-go/crosstalk/cmd/crosstalk").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build cmd/crosstalk: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// The token principals and their tokens: alice and bob for the attacks
// (carol is in their address book without a token); claude, chatgpt and
// gemini for the corpus of fixtures/hostile.
var tokens = map[string]string{
	"alice":   "alice-token-0123456789abcdef",
	"bob":     "bob-token-0123456789abcdef00",
	"claude":  "claude-token-0123456789abcde",
	"chatgpt": "chatgpt-token-0123456789abc",
	"gemini":  "gemini-token-0123456789abcd",
}

// Key ids the address book assigns.
const (
	aliceKeyID = "alice@hostile.test"
	bobKeyID   = "bob@hostile.test"
)

// baseConfig is the relay's config: two token principals, four agents
// (alice also answers to ZOË; café is named in NFD), two assigned key ids. extra is appended (top-level keys must come
// first, so it is inserted before the tables).
func baseConfig(extra string) string {
	return extra + `

[[tokens]]
token = "` + tokens["alice"] + `"
principal = "alice"

[[tokens]]
token = "` + tokens["bob"] + `"
principal = "bob"

[[agents]]
id = "alice"
names = ["ALICE", "ZOË"]
keys = ["` + aliceKeyID + `"]

[[agents]]
id = "bob"
names = ["BOB"]
keys = ["` + bobKeyID + `"]

[[agents]]
id = "carol"
names = ["CAROL"]

[[agents]]
id = "café"
names = ["CAFE\u0301"]
`
}

// relay is a running `crosstalk relay --config` child process.
type relay struct {
	t     *testing.T
	url   string
	dir   string
	logs  *syncbuf.Buffer
	cmd   *exec.Cmd
	trust string // the trust store file
	// reader is the principal whose token reads the ledger: alice unless
	// the config has no alice.
	reader string
}

// in returns r for a subtest: failures are t's.
func (r *relay) in(t *testing.T) *relay {
	c := *r
	c.t = t
	return &c
}

var listening = regexp.MustCompile(`msg="relay listening".* url=(\S+)`)

// startRelay writes config into a temporary directory and starts
// `crosstalk relay --config` on a free loopback port; the process is
// stopped when the test ends.
func startRelay(t *testing.T, config string) *relay {
	t.Helper()
	bin := crosstalkBinary(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "relay.toml")
	trust := filepath.Join(dir, "known_keys")
	config = fmt.Sprintf("trust_file = %q\n", trust) + config
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	cmd := exec.Command(bin, "relay", "--config", cfgPath, "--data", data, "--listen", "127.0.0.1:0", "--log-level", "debug")
	home := filepath.Join(dir, "home")
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "XDG_DATA_HOME="+filepath.Join(home, ".local", "share"))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{t: t, dir: dir, logs: &syncbuf.Buffer{}, cmd: cmd, trust: trust, reader: "alice"}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s relay: %v", bin, err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	urls := make(chan string, 1)
	go func() {
		defer close(done)
		br := bufio.NewReader(stderr)
		found := false
		for {
			line, err := br.ReadString('\n')
			r.logs.Write([]byte(line))
			if m := listening.FindStringSubmatch(line); m != nil && !found {
				found = true
				urls <- m[1]
			}
			if err != nil {
				break
			}
		}
		if !found {
			close(urls)
		}
		cmd.Wait()
	}()
	select {
	case u, ok := <-urls:
		if !ok {
			t.Fatalf("relay exited before listening:\n%s", r.logs)
		}
		r.url = u
	case <-time.After(60 * time.Second):
		t.Fatalf("relay did not log \"relay listening\" within 60 s:\n%s", r.logs)
	}
	return r
}

// answer is one HTTP answer.
type answer struct {
	status int
	body   []byte
}

// code returns error.code of a JSON error answer, or of the first
// rejected result.
func (a answer) code() string {
	var out struct {
		Error   *struct{ Code string }
		Results []struct {
			Error *struct{ Code string }
		}
	}
	json.Unmarshal(a.body, &out)
	if out.Error != nil {
		return out.Error.Code
	}
	for _, r := range out.Results {
		if r.Error != nil {
			return r.Error.Code
		}
	}
	return ""
}

// do sends a request with principal's token ("" for none).
func (r *relay) do(method, path, principal string, body []byte, header http.Header) answer {
	r.t.Helper()
	req, err := http.NewRequest(method, r.url+path, bytes.NewReader(body))
	if err != nil {
		r.t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if principal != "" {
		req.Header.Set("Authorization", "Bearer "+tokens[principal])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatalf("%s %s: %v\nrelay log:\n%s", method, path, err, r.logs)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return answer{status: res.StatusCode, body: b}
}

// post sends envelope text to /crosstalk/receive as principal, asking for
// the JSON answer.
func (r *relay) post(principal, text string) answer {
	r.t.Helper()
	return r.do(http.MethodPost, "/crosstalk/receive", principal, []byte(text), http.Header{"Accept": {"application/json"}})
}

// accepted posts text and requires one recorded envelope; it returns its
// result.
func (r *relay) accepted(principal, text string) result {
	r.t.Helper()
	a := r.post(principal, text)
	var out struct{ Results []result }
	if err := json.Unmarshal(a.body, &out); a.status != http.StatusOK || err != nil || len(out.Results) != 1 {
		r.t.Fatalf("POST as %s = %d %s, want 200 with one result", principal, a.status, a.body)
	}
	return out.Results[0]
}

// refused posts text and requires status and code, and that the ledger
// gained nothing but the rejection notice (docs/design.md §5.1).
func (r *relay) refused(principal, text string, status int, code string) answer {
	r.t.Helper()
	before := r.events()
	a := r.post(principal, text)
	if a.status != status || a.code() != code {
		r.t.Errorf("POST as %s = %d %s %s, want %d %s", principal, a.status, a.code(), a.body, status, code)
	}
	for _, ev := range r.since(before) {
		if d, _ := gateway.ParseData(ev); ev.Kind != gateway.KindNotify || d.Kind != "error" || ev.By != "system" {
			r.t.Errorf("refused POST as %s recorded %s by %s (%s), want only the rejection notice", principal, ev.Kind, ev.By, d.Title)
		}
	}
	return a
}

// result is one entry of the JSON answer of /crosstalk/receive.
type result struct {
	Message   string `json:"message"`
	EventID   string `json:"event_id"`
	GroupID   string `json:"group_id"`
	Duplicate bool   `json:"duplicate"`
	Status    string `json:"status"`
}

// events returns every event of every group, ordered by group then seq.
func (r *relay) events() []ledger.Event {
	r.t.Helper()
	var groups struct {
		Groups []struct {
			ID string `json:"group_id"`
		}
	}
	a := r.do(http.MethodGet, "/v1/groups", r.reader, nil, nil)
	if err := json.Unmarshal(a.body, &groups); a.status != http.StatusOK || err != nil {
		r.t.Fatalf("GET /v1/groups = %d %s (%v)", a.status, a.body, err)
	}
	var all []ledger.Event
	for _, g := range groups.Groups {
		var page struct{ Events []ledger.Event }
		a := r.do(http.MethodGet, "/v1/groups/"+url.PathEscape(g.ID)+"/events", r.reader, nil, nil)
		if err := json.Unmarshal(a.body, &page); a.status != http.StatusOK || err != nil {
			r.t.Fatalf("GET events of %s = %d %s (%v)", g.ID, a.status, a.body, err)
		}
		all = append(all, page.Events...)
	}
	return all
}

// since returns the events that are not in before.
func (r *relay) since(before []ledger.Event) []ledger.Event {
	r.t.Helper()
	seen := make(map[string]bool, len(before))
	for _, ev := range before {
		seen[ev.ID] = true
	}
	var out []ledger.Event
	for _, ev := range r.events() {
		if !seen[ev.ID] {
			out = append(out, ev)
		}
	}
	return out
}

// event returns the event with id.
func (r *relay) event(id string) (ledger.Event, gateway.EventData) {
	r.t.Helper()
	for _, ev := range r.events() {
		if ev.ID == id {
			d, err := gateway.ParseData(ev)
			if err != nil {
				r.t.Fatalf("event %s: %v", id, err)
			}
			return ev, d
		}
	}
	r.t.Fatalf("no event %s in the ledger", id)
	return ledger.Event{}, gateway.EventData{}
}

// trustEntry returns the trust store's entry for pkid.
func (r *relay) trustEntry(pkid string) (signing.TrustEntry, bool) {
	r.t.Helper()
	e, ok, err := signing.NewTrustStore(r.trust).Lookup(pkid)
	if err != nil {
		r.t.Fatalf("reading the trust store: %v", err)
	}
	return e, ok
}

// envText composes an envelope and returns its text.
func envText(from, to, intent, ctx, body string, mod ...func(*envelope.Envelope)) string {
	e := envelope.New(from, to, intent, body)
	e.Context = ctx
	for _, m := range mod {
		m(e)
	}
	b, err := envelope.Marshal(e)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// signed returns text signed by key, announcing the public key.
func signed(t *testing.T, text string, key *signing.PrivateKey) string {
	t.Helper()
	out, err := signing.Sign([]byte(text), key, &signing.SignOptions{Announce: true})
	if err != nil {
		t.Fatalf("Sign() = %v", err)
	}
	return string(out)
}

func genKey(t *testing.T, pkid string) *signing.PrivateKey {
	t.Helper()
	k, err := signing.GenerateKey(signing.Ed25519, pkid)
	if err != nil {
		t.Fatalf("GenerateKey(%s) = %v", pkid, err)
	}
	return k
}

// withParent sets an envelope's parent.
func withParent(id string) func(*envelope.Envelope) {
	return func(e *envelope.Envelope) { e.Parent = id }
}

// withMeta adds a META block of one field.
func withMeta(ns, key, value string) func(*envelope.Envelope) {
	return func(e *envelope.Envelope) {
		e.Meta = append(e.Meta, envelope.Meta{Namespace: ns, Fields: []envelope.Field{{Key: key, Value: value}}})
	}
}

// kindsBy lists "kind by" of events, for failure messages.
func kindsBy(evs []ledger.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, "%s by %s; ", ev.Kind, ev.By)
	}
	return b.String()
}
