package relaytest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/sqlite"
)

// tokens are the bearer tokens of the in-process relays, by principal.
var tokens = map[string]string{
	"claude":  "claude-token-0123456789",
	"chatgpt": "chatgpt-token-0123456789",
	"gemini":  "gemini-token-0123456789",
}

// relay is an in-process relay: gateway/api over a SQLite ledger in a
// temporary directory, served by httptest on loopback.
type relay struct {
	t     *testing.T
	srv   *httptest.Server
	relay *gateway.Relay
	store ledger.Store
}

// book is the address book of the in-process relays.
func book(t *testing.T, keys map[string][]string) *gateway.AddressBook {
	t.Helper()
	b, err := gateway.NewAddressBook([]gateway.Agent{
		{ID: "claude", Names: []string{"CLAUDE"}, Roles: []string{"reviewer"}, Keys: keys["claude"]},
		{ID: "chatgpt", Names: []string{"CHATGPT"}, Roles: []string{"reviewer"}, Keys: keys["chatgpt"]},
		{ID: "gemini", Names: []string{"GEMINI"}, Keys: keys["gemini"]},
	})
	if err != nil {
		t.Fatalf("NewAddressBook() = %v", err)
	}
	return b
}

// newRelay starts an in-process relay. gopts.Book defaults to book(t, nil).
func newRelay(t *testing.T, gopts *gateway.Options, aopts *api.Options) *relay {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "ledger.db"), nil)
	if err != nil {
		t.Fatalf("sqlite.Open() = %v", err)
	}
	if gopts == nil {
		gopts = &gateway.Options{}
	}
	if gopts.Book == nil {
		gopts.Book = book(t, nil)
	}
	r := gateway.New(st, gopts)
	a := api.New(r, aopts)
	srv := httptest.NewServer(a)
	t.Cleanup(func() {
		a.Close()
		srv.Close()
		st.Close()
	})
	return &relay{t: t, srv: srv, relay: r, store: st}
}

// request is one HTTP request to a relay.
type request struct {
	method, path string
	token        string // principal whose token to send; "" for none
	rawToken     string // sent as is when set
	header       http.Header
	host         string
	body         []byte
}

// response is the relay's answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r *relay) do(req request) response {
	r.t.Helper()
	if req.method == "" {
		req.method = http.MethodPost
	}
	hr, err := http.NewRequestWithContext(r.t.Context(), req.method, r.srv.URL+req.path, bytes.NewReader(req.body))
	if err != nil {
		r.t.Fatalf("NewRequest(%s %s) = %v", req.method, req.path, err)
	}
	for k, vs := range req.header {
		for _, v := range vs {
			hr.Header.Add(k, v)
		}
	}
	if req.host != "" {
		hr.Host = req.host
	}
	switch {
	case req.rawToken != "":
		hr.Header.Set("Authorization", "Bearer "+req.rawToken)
	case req.token != "":
		hr.Header.Set("Authorization", "Bearer "+tokens[req.token])
	}
	res, err := r.srv.Client().Do(hr)
	if err != nil {
		r.t.Fatalf("%s %s = %v", req.method, req.path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		r.t.Fatalf("%s %s: reading the answer: %v", req.method, req.path, err)
	}
	return response{status: res.StatusCode, header: res.Header, body: b}
}

// post posts envelope text to /crosstalk/receive as principal, asking for
// JSON, and requires a 200 with one result.
func (r *relay) post(principal, text string) api.Result {
	r.t.Helper()
	res := r.do(request{path: "/crosstalk/receive", token: principal, body: []byte(text), header: http.Header{"Accept": {"application/json"}}})
	var out struct{ Results []api.Result }
	if err := json.Unmarshal(res.body, &out); res.status != http.StatusOK || err != nil || len(out.Results) != 1 {
		r.t.Fatalf("POST /crosstalk/receive as %s = %d %s, want 200 with one result", principal, res.status, res.body)
	}
	return out.Results[0]
}

// events returns every event of the ledger's conversation groups,
// ordered by group and seq. The bookkeeping groups (gateway.SystemGroup:
// the liveness every authenticated request renews, reservations) are
// left out: what an attack must not write is a conversation event.
func (r *relay) events() []ledger.Event {
	r.t.Helper()
	ctx := context.Background()
	gs, err := r.store.Groups(ctx)
	if err != nil {
		r.t.Fatalf("Groups() = %v", err)
	}
	var out []ledger.Event
	for _, g := range gs {
		if gateway.SystemGroup(g.ID) {
			continue
		}
		evs, err := r.store.Range(ctx, g.ID, 0, nil, 0)
		if err != nil {
			r.t.Fatalf("Range(%s) = %v", g.ID, err)
		}
		out = append(out, evs...)
	}
	return out
}

// newEvents returns the events of after that are not in before.
func newEvents(before, after []ledger.Event) []ledger.Event {
	seen := make(map[string]bool, len(before))
	for _, ev := range before {
		seen[ev.ID] = true
	}
	var out []ledger.Event
	for _, ev := range after {
		if !seen[ev.ID] {
			out = append(out, ev)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// isErrorNotice reports whether ev is the system.notify of kind error that
// records a rejection.
func isErrorNotice(t *testing.T, ev ledger.Event) bool {
	t.Helper()
	if ev.Kind != gateway.KindNotify {
		return false
	}
	d, err := gateway.ParseData(ev)
	if err != nil {
		t.Fatalf("ParseData(%s) = %v", ev.ID, err)
	}
	return d.Kind == "error"
}

// errorCode returns the error code of an answer: meta: error Code: of
// the first ERROR envelope of a text answer, error.code of a JSON one.
func errorCode(res response) string {
	if bytes.HasPrefix(bytes.TrimSpace(res.body), []byte("{")) {
		var out struct {
			Error struct{ Code string }
		}
		json.Unmarshal(res.body, &out)
		return out.Error.Code
	}
	rd := envelope.NewReader(bytes.NewReader(res.body))
	for {
		e, err := rd.Next()
		if err == io.EOF {
			return ""
		}
		if err == nil && e.Intent == envelope.IntentError {
			code, _ := e.MetaValue("error", "Code")
			return code
		}
	}
}

// envText composes a canonical envelope text.
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

// checkServing posts a fresh good envelope as claude and requires it to be
// recorded: the relay still works after whatever came before.
func (r *relay) checkServing() {
	r.t.Helper()
	res := r.post("claude", envText("CLAUDE", "GEMINI", "REQUEST", "after", "still there?"))
	if res.Duplicate || res.EventID == "" {
		r.t.Fatalf("good envelope after hostile input = %+v, want a new event", res)
	}
}
