package server_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/server"
	"github.com/crosstalk-go/crosstalk/internal/dnstest"
	"github.com/crosstalk-go/crosstalk/signing"
)

func shutdown(t *testing.T, s *server.Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown() = %v", err)
	}
}

func post(t *testing.T, url string, text string) (int, string) {
	t.Helper()
	res, err := http.Post(url+"/crosstalk/receive", "text/plain; charset=utf-8", strings.NewReader(text))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestOpenServesAndShutsDown starts a relay, records an envelope over
// HTTP, shuts it down, and opens it again on the same data dir: the event
// is still there, and the same envelope is a duplicate.
func TestOpenServesAndShutsDown(t *testing.T) {
	dir := t.TempDir()
	opts := &server.Options{DataDir: dir, Agents: []gateway.Agent{{ID: "claude", Names: []string{"CLAUDE"}}, {ID: "chatgpt", Names: []string{"CHATGPT"}}}}
	s, err := server.Open(t.Context(), opts)
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	if !strings.HasPrefix(s.URL(), "http://127.0.0.1:") {
		t.Errorf("URL() = %q, want a loopback URL", s.URL())
	}
	e := envelope.New("CLAUDE", "CHATGPT", envelope.IntentRequest, "Is the deploy blocked?")
	e.Context = "deploy"
	b, err := envelope.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if code, body := post(t, s.URL(), text); code != http.StatusOK || !strings.Contains(body, "ACK") {
		t.Fatalf("POST = %d %q, want 200 and a receipt", code, body)
	}
	// Handler is the same relay without the listener.
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, s.URL()+"/v1/groups/deploy/events", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), e.Message) {
		t.Errorf("Handler() GET events = %d %q, want the event", rec.Code, rec.Body.String())
	}
	shutdown(t, s)
	if err := s.Shutdown(t.Context()); err != nil {
		t.Errorf("second Shutdown() = %v, want the first's nil", err)
	}
	if _, err := http.Get(s.URL() + "/v1/groups"); err == nil {
		t.Errorf("GET after Shutdown succeeded, want the listener closed")
	}

	s, err = server.Open(t.Context(), opts)
	if err != nil {
		t.Fatalf("Open() again = %v", err)
	}
	defer shutdown(t, s)
	if code, body := post(t, s.URL(), text); code != http.StatusOK || !strings.Contains(body, "Duplicate: true") {
		t.Errorf("POST again after restart = %d %q, want 200 and a duplicate receipt", code, body)
	}
	evs, err := s.Store().Range(t.Context(), "deploy", 0, nil, 10)
	if err != nil || len(evs) == 0 {
		t.Errorf("Store().Range(deploy) = %d events, %v; want the recorded event", len(evs), err)
	}
}

// TestOpenRefuses checks the options Open refuses before it opens anything.
func TestOpenRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts server.Options
		is   error
	}{
		{"no data dir", server.Options{}, nil},
		{"public without tokens", server.Options{DataDir: t.TempDir(), Listen: "0.0.0.0:0"}, server.ErrNotLoopback},
		{"bad listen", server.Options{DataDir: t.TempDir(), Listen: "7777"}, nil},
		{"bad agents", server.Options{DataDir: t.TempDir(), Agents: []gateway.Agent{{ID: "a"}, {ID: "a"}}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := server.Open(t.Context(), &tc.opts)
			if err == nil {
				shutdown(t, s)
				t.Fatalf("Open() = nil error, want one")
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("Open() = %v, want errors.Is %v", err, tc.is)
			}
		})
	}
}

func TestOpenLedgerMustExist(t *testing.T) {
	_, err := server.OpenLedger(t.Context(), server.LedgerOptions{Spec: filepath.Join(t.TempDir(), "none.db"), MustExist: true})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("OpenLedger(missing, MustExist) = %v, want fs.ErrNotExist", err)
	}
	st, err := server.OpenLedger(t.Context(), server.LedgerOptions{Spec: filepath.Join(t.TempDir(), "new", "ledger.db")})
	if err != nil {
		t.Fatalf("OpenLedger(new) = %v", err)
	}
	st.Close()
}

// TestOpenCore builds a relay without listeners, as crosstalk mcp --data
// does, and records an envelope through it.
func TestOpenCore(t *testing.T) {
	c, err := server.OpenCore(t.Context(), &server.Options{DataDir: t.TempDir(), RequireSignatures: true})
	if err != nil {
		t.Fatalf("OpenCore() = %v", err)
	}
	defer c.Close()
	b, err := envelope.Marshal(envelope.New("CLAUDE", "CHATGPT", envelope.IntentRequest, "unsigned"))
	if err != nil {
		t.Fatal(err)
	}
	outs, err := c.Relay.Ingest(t.Context(), gateway.Intake{Transport: "test", Data: bytes.NewReader(b)})
	if err != nil || len(outs) != 1 || outs[0].Accepted() {
		t.Errorf("Ingest(unsigned) with RequireSignatures = %+v, %v; want one refusal", outs, err)
	}
}

// TestOpenCoreDNSKeys: the default verifier looks keys up in DNS at
// Options.DNSServer, pins them (source dns) once the relay accepts the
// envelope, and does no lookup with DNSServerNone.
func TestOpenCoreDNSKeys(t *testing.T) {
	k, err := signing.GenerateKey(signing.Ed25519, "alice@example.com")
	if err != nil {
		t.Fatal(err)
	}
	dns := dnstest.Start(t, map[string][][]string{
		"alice._crosstalk-key.example.com.": {{"ed25519:pk=" + base64.RawURLEncoding.EncodeToString(k.Public().Bytes())}},
	})
	text, _ := envelope.Marshal(envelope.New("ALICE", "BOB", envelope.IntentRequest, "signed"))
	signed, err := signing.Sign(text, k, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		server, status string
	}{
		{dns.Addr(), gateway.StatusVerified},
		{server.DNSServerNone, gateway.StatusUnknownKey},
	} {
		c, err := server.OpenCore(t.Context(), &server.Options{DataDir: t.TempDir(), DNSServer: tt.server})
		if err != nil {
			t.Fatal(err)
		}
		outs, err := c.Relay.Ingest(t.Context(), gateway.Intake{Transport: "test", Data: bytes.NewReader(signed)})
		if err != nil || len(outs) != 1 || outs[0].Verification.Status != tt.status {
			t.Errorf("DNSServer %q: Ingest = %+v, %v; want %s", tt.server, outs, err, tt.status)
		}
		e, pinned, _ := c.Trust.Lookup("alice@example.com")
		if want := tt.status == gateway.StatusVerified; pinned != want || pinned && e.Source != signing.SourceDNS {
			t.Errorf("DNSServer %q: pin %+v, %v", tt.server, e, pinned)
		}
		c.Close()
	}
	if n := len(dns.Queries()); n != 1 {
		t.Errorf("%d DNS queries, want 1", n)
	}
}

// TestHostsBehindProxy: hosts = ["relay.example.org"] (docs/configuration.md:
// "a name without a port gets the listen port. Needed behind a reverse
// proxy") must let through what a proxy on the default port forwards,
// Host: relay.example.org without a port, as browsers send it; a Host
// the config does not name stays refused.
func TestHostsBehindProxy(t *testing.T) {
	s, err := server.Open(t.Context(), &server.Options{DataDir: t.TempDir(), Hosts: []string{"relay.example.org", "Other.Example.org:8443", "::1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, s)
	port := s.URL()[strings.LastIndex(s.URL(), ":")+1:]
	for _, tc := range []struct {
		host string
		want int
	}{
		{"relay.example.org", http.StatusOK},
		{"RELAY.example.org", http.StatusOK},
		{"relay.example.org:" + port, http.StatusOK},
		{"other.example.org:8443", http.StatusOK},
		{"127.0.0.1:" + port, http.StatusOK},
		{"[::1]", http.StatusOK},
		{"relay.example.org:444", http.StatusForbidden},
		{"other.example.org", http.StatusForbidden},
		{"evil.example", http.StatusForbidden},
		{"127.0.0.1", http.StatusForbidden},
	} {
		req, _ := http.NewRequest(http.MethodGet, s.URL()+"/v1/groups", nil)
		req.Host = tc.host
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != tc.want {
			t.Errorf("Host %q: %d, want %d", tc.host, res.StatusCode, tc.want)
		}
	}
}
