package c2a_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/c2a"
	"github.com/crosstalk-go/crosstalk/internal/testrelay"
)

// TestCursors: Remote.Cursors answers what Local.Cursors does on the same
// relay, every group's delivery cursor in one call; a relay without the
// cursors endpoint is asked group by group; a refusal is the caller's
// error, not a reason to ask again.
func TestCursors(t *testing.T) {
	r := testrelay.Start(t, nil)
	for _, g := range []string{"alpha", "beta", "gamma"} {
		ev := r.Send(t, "CHATGPT", "CLAUDE", "INFORM", "hello", g, "")
		if g == "gamma" {
			continue // no cursor here
		}
		if _, err := r.Relay.Act(t.Context(), gateway.ActionRequest{Action: gateway.ActionDelivered, Group: g, EventID: ev.ID, Actor: "claude"}); err != nil {
			t.Fatal(err)
		}
	}
	local, err := (&c2a.Local{Relay: r.Relay}).Cursors(t.Context(), "claude")
	if err != nil || len(local) != 2 || local["alpha"] == 0 || local["beta"] == 0 {
		t.Fatalf("Local.Cursors = %v, %v; want alpha and beta", local, err)
	}
	remote, err := (&c2a.Remote{URL: r.URL, Retries: -1}).Cursors(t.Context(), "claude")
	if err != nil || len(remote) != len(local) || remote["alpha"] != local["alpha"] || remote["beta"] != local["beta"] {
		t.Fatalf("Remote.Cursors = %v, %v; want %v", remote, err, local)
	}

	// An old relay: no cursors endpoint, and (here) no groups.
	old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if strings.HasSuffix(req.URL.Path, "/v1/groups") {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"groups":[]}`))
			return
		}
		http.NotFound(w, req)
	}))
	defer old.Close()
	if got, err := (&c2a.Remote{URL: old.URL, Retries: -1}).Cursors(t.Context(), "claude"); err != nil || len(got) != 0 {
		t.Errorf("Remote.Cursors on a relay without the endpoint = %v, %v; want none, no error", got, err)
	}

	// A refusal.
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte(`{"error":{"code":"permission_denied","message":"principal \"chatgpt\" may not act as \"claude\""}}`))
	}))
	defer refusing.Close()
	if _, err := (&c2a.Remote{URL: refusing.URL, Retries: -1}).Cursors(t.Context(), "claude"); err == nil || !strings.Contains(err.Error(), "may not act as") {
		t.Errorf("Remote.Cursors refused = %v, want the relay's reason", err)
	}
}

// TestResume: Remote.Resume answers what Local.Resume does on the same
// relay (the cursors and the position to follow from, past a confirmed
// history); a relay that computes no position (no resume_after) and one
// without the cursors endpoint give position 0, the whole log, as before.
func TestResume(t *testing.T) {
	r := testrelay.Start(t, nil)
	for _, g := range []string{"alpha", "beta"} {
		ev := r.Send(t, "CHATGPT", "CLAUDE", "INFORM", "hello", g, "")
		if _, err := r.Relay.Act(t.Context(), gateway.ActionRequest{Action: gateway.ActionDelivered, Group: g, EventID: ev.ID, Actor: "claude"}); err != nil {
			t.Fatal(err)
		}
	}
	r.Send(t, "CHATGPT", "CLAUDE", "INFORM", "new", "gamma", "")
	lc, lpos, err := (&c2a.Local{Relay: r.Relay}).Resume(t.Context(), "claude")
	if err != nil || len(lc) != 2 || lpos == 0 {
		t.Fatalf("Local.Resume = %v, %d, %v; want two cursors and a position past them", lc, lpos, err)
	}
	rc, rpos, err := (&c2a.Remote{URL: r.URL, Retries: -1}).Resume(t.Context(), "CLAUDE")
	if err != nil || rpos != lpos || len(rc) != 2 || rc["alpha"] != lc["alpha"] || rc["beta"] != lc["beta"] {
		t.Fatalf("Remote.Resume = %v, %d, %v; want %v, %d", rc, rpos, err, lc, lpos)
	}

	// A relay from before resume_after.
	old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"agent":"claude","cursors":{},"delivered":{"alpha":1}}`))
	}))
	defer old.Close()
	if cs, pos, err := (&c2a.Remote{URL: old.URL, Retries: -1}).Resume(t.Context(), "claude"); err != nil || pos != 0 || cs["alpha"] != 1 {
		t.Errorf("Remote.Resume on a relay without resume_after = %v, %d, %v; want alpha:1, position 0", cs, pos, err)
	}
	// A relay without the endpoint, and no groups.
	older := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if strings.HasSuffix(req.URL.Path, "/v1/groups") {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"groups":[]}`))
			return
		}
		http.NotFound(w, req)
	}))
	defer older.Close()
	if cs, pos, err := (&c2a.Remote{URL: older.URL, Retries: -1}).Resume(t.Context(), "claude"); err != nil || pos != 0 || len(cs) != 0 {
		t.Errorf("Remote.Resume on a relay without the endpoint = %v, %d, %v; want none, position 0", cs, pos, err)
	}
}
