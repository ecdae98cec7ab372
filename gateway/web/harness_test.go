package web_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
	"github.com/crosstalk-go/crosstalk/gateway/reserve"
	"github.com/crosstalk-go/crosstalk/gateway/tokens"
	"github.com/crosstalk-go/crosstalk/gateway/web"
	"github.com/crosstalk-go/crosstalk/signing"
)

// harness is an in-process relay with the pages: the real API and web
// handler over an in-memory ledger and a trust store in a temporary
// directory, served by httptest on loopback.
type harness struct {
	t      *testing.T
	srv    *httptest.Server
	relay  *gateway.Relay
	store  ledger.Store
	resv   *reserve.Service
	trust  *signing.TrustStore
	client *http.Client // with a cookie jar: one browser
}

type harnessOptions struct {
	tokens map[string]string
	minted *tokens.Store // crosstalk token new; also the trust page's mint button
	admins []string
	tls    bool
	secure bool             // web.Options.Secure: behind a TLS-terminating proxy
	now    func() time.Time // the relay's and ledger's clock; nil is time.Now
	stale  time.Duration    // liveness threshold; 0 is the default
	// wrap, when set, wraps the ledger the relay and the pages read
	// (a read counter); the harness's store stays the unwrapped one.
	wrap func(ledger.Store) ledger.Store
}

func newHarness(t *testing.T, o *harnessOptions) *harness {
	t.Helper()
	if o == nil {
		o = &harnessOptions{}
	}
	var st ledger.Store = memory.New(o.now)
	if o.wrap != nil {
		st = o.wrap(st)
	}
	trust := signing.NewTrustStore(filepath.Join(t.TempDir(), "known_keys"))
	verifier := gateway.NewTrustVerifier(&signing.Verifier{Store: trust})
	book, err := gateway.NewAddressBook([]gateway.Agent{
		{ID: "claude", Names: []string{"CLAUDE"}, Roles: []string{"reviewer"}},
		{ID: "chatgpt", Names: []string{"CHATGPT"}, Roles: []string{"reviewer"}},
		{ID: "gemini", Names: []string{"GEMINI"}},
	})
	if err != nil {
		t.Fatalf("NewAddressBook() = %v", err)
	}
	relay := gateway.New(st, &gateway.Options{Book: book, Verifier: verifier, Now: o.now, StaleAfter: o.stale})
	resv, err := reserve.NewService(t.Context(), st, reserve.Options{Now: o.now, Policy: relay.ReservePolicy()})
	if err != nil {
		t.Fatal(err)
	}
	opts := &api.Options{Tokens: o.tokens, Heartbeat: 200 * time.Millisecond}
	if o.minted != nil {
		opts.Minted = o.minted
	}
	a := api.New(relay, opts)
	a.MountReservations(resv)
	site, err := web.New(relay, a, &web.Options{Trust: trust, Admins: o.admins, Heartbeat: 200 * time.Millisecond, Tokens: o.minted, Reservations: resv, Secure: o.secure})
	if err != nil {
		t.Fatalf("web.New() = %v", err)
	}
	var srv *httptest.Server
	if o.tls {
		srv = httptest.NewTLSServer(site)
	} else {
		srv = httptest.NewServer(site)
	}
	t.Cleanup(func() {
		a.Close()
		srv.Close()
		st.Close()
	})
	h := &harness{t: t, srv: srv, relay: relay, store: st, resv: resv, trust: trust}
	h.client = h.newClient()
	return h
}

// newClient returns a client with its own cookie jar that does not follow
// redirects, so tests see the 303s.
func (h *harness) newClient() *http.Client {
	jar, _ := cookiejar.New(nil)
	c := h.srv.Client()
	return &http.Client{Transport: c.Transport, Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
}

// do sends a request with header pairs "Name", "value", … and returns the
// response (body read) and the body.
func (h *harness) do(c *http.Client, method, path string, body io.Reader, header ...string) (*http.Response, string) {
	h.t.Helper()
	req, err := http.NewRequestWithContext(h.t.Context(), method, h.srv.URL+path, body)
	if err != nil {
		h.t.Fatalf("NewRequest(%s %s) = %v", method, path, err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := c.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s = %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		h.t.Fatalf("%s %s: reading body: %v", method, path, err)
	}
	return res, string(b)
}

// get fetches a page with the harness's browser.
func (h *harness) get(path string) (int, string) {
	h.t.Helper()
	res, body := h.do(h.client, http.MethodGet, path, nil)
	return res.StatusCode, body
}

var csrfMeta = regexp.MustCompile(`<meta name="csrf-token" content="([^"]*)">`)

// csrf loads a page and returns the session's CSRF token from it.
func (h *harness) csrf() string {
	h.t.Helper()
	_, body := h.get("/ui/paste")
	m := csrfMeta.FindStringSubmatch(body)
	if m == nil {
		h.t.Fatalf("no csrf-token meta tag on /ui/paste:\n%s", body)
	}
	return m[1]
}

// post submits a form with the harness's browser, adding the CSRF token
// unless the form has one already.
func (h *harness) post(path string, form url.Values, header ...string) (*http.Response, string) {
	h.t.Helper()
	if _, ok := form["csrf"]; !ok {
		form.Set("csrf", h.csrf())
	}
	header = append([]string{"Content-Type", "application/x-www-form-urlencoded"}, header...)
	return h.do(h.client, http.MethodPost, path, strings.NewReader(form.Encode()), header...)
}

// ingest records text as if it came over HTTP and returns the outcomes.
func (h *harness) ingest(text string) []gateway.Outcome {
	h.t.Helper()
	outs, err := h.relay.Ingest(h.t.Context(), gateway.Intake{Transport: "http", Data: strings.NewReader(text)})
	if err != nil {
		h.t.Fatalf("Ingest() = %v", err)
	}
	return outs
}

// envText returns the canonical text of a new envelope.
func envText(t testing.TB, from, to, intent, context, body string, edit ...func(*envelope.Envelope)) string {
	t.Helper()
	e := envelope.New(from, to, intent, body)
	e.Context = context
	for _, f := range edit {
		f(e)
	}
	b, err := envelope.Marshal(e)
	if err != nil {
		t.Fatalf("Marshal() = %v", err)
	}
	return string(b)
}

// events returns every event of group.
func (h *harness) events(group string) []ledger.Event {
	h.t.Helper()
	evs, err := h.store.Range(h.t.Context(), group, 0, nil, 0)
	if err != nil {
		h.t.Fatalf("Range(%s) = %v", group, err)
	}
	return evs
}

func mustContain(t *testing.T, what, body string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(body, w) {
			t.Errorf("%s does not contain %q", what, w)
		}
	}
	if t.Failed() && testing.Verbose() {
		t.Logf("%s:\n%s", what, body)
	}
}

func mustNotContain(t *testing.T, what, body string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if strings.Contains(body, w) {
			t.Errorf("%s contains %q", what, w)
		}
	}
}
