package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
)

// TestMount checks the hook for browser pages: page paths pass the same
// gate as the API, anonymous page requests reach the pages when tokens are
// configured, and OpenStream's context ends with Close.
func TestMount(t *testing.T) {
	st := memory.New(nil)
	defer st.Close()
	relay := gateway.New(st, nil)
	tokens := map[string]string{"page-token-0123456789": "claude"}
	a := api.New(relay, &api.Options{Tokens: tokens})
	type seen struct {
		principal string
		token     bool
	}
	got := make(chan seen, 1)
	streamEnded := make(chan struct{})
	pages := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, tok := api.Principal(r)
		if r.URL.Path == "/ui/stream" {
			ctx, done, ok := api.OpenStream(w, r)
			if !ok {
				return
			}
			defer done()
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-ctx.Done()
			close(streamEnded)
			return
		}
		got <- seen{p, tok}
		w.Write([]byte("page"))
	})
	srv := httptest.NewServer(a.Mount(pages))
	defer srv.Close()

	do := func(method, path string, header ...string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), method, srv.URL+path, nil)
		for i := 0; i+1 < len(header); i += 2 {
			if header[i] == "Host" {
				req.Host = header[i+1]
			}
			req.Header.Set(header[i], header[i+1])
		}
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatalf("%s %s = %v", method, path, err)
		}
		defer res.Body.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := res.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		return res.StatusCode, b.String()
	}
	for _, tc := range []struct {
		name          string
		method, path  string
		header        []string
		code          int
		want          string
		principal     string
		authenticated bool
	}{
		{"anonymous page", "GET", "/", nil, 200, "page", "", false},
		{"anonymous page POST", "POST", "/ui/x", nil, 200, "page", "", false},
		{"bearer page", "GET", "/ui/x", []string{"Authorization", "Bearer page-token-0123456789"}, 200, "page", "claude", true},
		{"wrong bearer", "GET", "/ui/x", []string{"Authorization", "Bearer nope"}, 401, "E-PERM", "", false},
		{"foreign host", "GET", "/", []string{"Host", "evil.example"}, 403, "E-PERM", "", false},
		{"cross-origin POST", "POST", "/ui/x", []string{"Origin", "http://evil.example"}, 403, "E-PERM", "", false},
		{"cross-site POST", "POST", "/ui/x", []string{"Sec-Fetch-Site", "cross-site"}, 403, "E-PERM", "", false},
		{"API still needs its token", "GET", "/v1/groups", nil, 401, "E-PERM", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := do(tc.method, tc.path, tc.header...)
			if code != tc.code || !strings.Contains(body, tc.want) {
				t.Fatalf("%s %s = %d %q, want %d %q", tc.method, tc.path, code, body, tc.code, tc.want)
			}
			if code == 200 {
				if s := <-got; s.principal != tc.principal || s.token != tc.authenticated {
					t.Errorf("Principal() = %q, %v, want %q, %v", s.principal, s.token, tc.principal, tc.authenticated)
				}
			}
		})
	}
	if p, ok := a.TokenPrincipal(" page-token-0123456789 "); !ok || p != "claude" {
		t.Errorf("TokenPrincipal(good) = %q, %v", p, ok)
	}
	if _, ok := a.TokenPrincipal("page-token"); ok {
		t.Errorf("TokenPrincipal(prefix) = ok")
	}

	// Close ends page streams.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/ui/stream", nil)
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	a.Close()
	select {
	case <-streamEnded:
	case <-ctx.Done():
		t.Fatal("Close did not end the page stream")
	}
}
