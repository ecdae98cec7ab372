package api_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/internal/fakeclock"
	"github.com/crosstalk-go/crosstalk/internal/syncbuf"
)

// logLines returns the JSON log records written to s so far.
func logLines(t *testing.T, s *syncbuf.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

func refusalHarness(t *testing.T, opts *api.Options) (*harness, *syncbuf.Buffer, *fakeclock.Clock) {
	t.Helper()
	buf := &syncbuf.Buffer{}
	opts.Logger = slog.New(slog.NewJSONHandler(buf, nil))
	c := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	h := newHarness(t, opts, func(s *api.Server, _ ledger.Store) { api.SetRefusalClock(s, c.Now) })
	return h, buf, c
}

func TestGateRefusalsLogged(t *testing.T) {
	const secret = "s3cret-token-value"
	h, buf, _ := refusalHarness(t, &api.Options{Tokens: map[string]string{"good": "claude"}, Rate: 1, Burst: 1})
	longPath := "/v1/groups/%E2%80%AE%00" + strings.Repeat("a", 500) + "/events"
	cases := []struct {
		name, method, path, body string
		header                   []string
		reason, code             string
		status                   int
	}{
		{"wrong host", "GET", "/v1/groups", "", []string{"Authorization", "Bearer good"}, "host", "E-PERM", 403},
		{"cross origin", "POST", "/v1/send", `{"text":"private body"}`, []string{"Authorization", "Bearer good", "Origin", "http://evil.example"}, "origin", "E-PERM", 403},
		{"unknown token", "GET", longPath, "", []string{"Authorization", "Bearer " + secret}, "token", "E-PERM", 401},
		{"missing token", "GET", "/v1/groups", "", nil, "token", "E-PERM", 401},
		{"rate", "GET", "/v1/groups", "", []string{"Authorization", "Bearer good"}, "rate", "E-RATE", 429},
	}
	// Spend the principal's one-request burst so that the "rate" case is refused.
	if st, _ := h.do("GET", "/v1/groups", "", "Authorization", "Bearer good"); st != http.StatusOK {
		t.Fatalf("first request: status %d", st)
	}
	for _, tc := range cases {
		header := tc.header
		if tc.reason == "host" {
			header = append(header, "Host", "evil.example")
		}
		req, _ := http.NewRequestWithContext(t.Context(), tc.method, h.srv.URL+"/x", strings.NewReader(tc.body))
		req.URL.Opaque = tc.path
		for i := 0; i+1 < len(header); i += 2 {
			if header[i] == "Host" {
				req.Host = header[i+1]
			} else {
				req.Header.Set(header[i], header[i+1])
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.status)
		}
	}
	lines := logLines(t, buf)
	if len(lines) != len(cases) {
		t.Fatalf("%d log lines, want %d: %v", len(lines), len(cases), lines)
	}
	for i, tc := range cases {
		l := lines[i]
		if l["level"] != "WARN" || l["msg"] != "request refused" || l["reason"] != tc.reason || l["code"] != tc.code ||
			l["status"] != float64(tc.status) || l["method"] != tc.method || l["remote"] == "" {
			t.Errorf("%s: log line %v", tc.name, l)
		}
	}
	path, _ := lines[2]["path"].(string)
	if len(path) > 220 || strings.ContainsAny(path, "\u202e\x00") || !strings.HasPrefix(path, "/v1/groups/%E2%80%AE%00aaa") || !strings.HasSuffix(path, "a…") {
		t.Errorf("long hostile path logged as %q", path)
	}
	all := buf.String()
	if strings.Contains(all, secret) || strings.Contains(all, "private body") || strings.Contains(all, "good") {
		t.Errorf("log holds a token or a body:\n%s", all)
	}
}

func TestGateRefusalFloodBounded(t *testing.T) {
	h, buf, c := refusalHarness(t, &api.Options{Tokens: map[string]string{"good": "claude"}})
	const flood = 200
	for range flood {
		// 401, then 429 past the bound on unknown tokens
		// (api.TokenGuessBurst): both are refusals for the token.
		if st, _ := h.do("GET", "/v1/groups", "", "Authorization", "Bearer wrong"); st != http.StatusUnauthorized && st != http.StatusTooManyRequests {
			t.Fatalf("status %d, want 401 or 429", st)
		}
	}
	lines := logLines(t, buf)
	if len(lines) == 0 || len(lines) > 10 {
		t.Fatalf("a flood of %d refusals in one second logged %d lines, want 1..10", flood, len(lines))
	}
	logged := len(lines)
	c.Add(time.Second)
	h.do("GET", "/v1/groups", "", "Authorization", "Bearer wrong")
	lines = logLines(t, buf)
	if len(lines) != logged+2 {
		t.Fatalf("after the window: %d lines, want %d", len(lines), logged+2)
	}
	sup := lines[logged]
	if sup["msg"] != "gate refusals suppressed" || sup["reason"] != "token" || sup["count"] != float64(flood-logged) {
		t.Errorf("suppressed line %v, want count %d", sup, flood-logged)
	}
	if lines[logged+1]["msg"] != "request refused" {
		t.Errorf("line after the window %v", lines[logged+1])
	}
}
