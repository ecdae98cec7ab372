package server_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/server"
)

// TestServerRunsReturns: a relay opened with Returns chases an
// undischarged obligation on its own: the return appears in the ledger
// without anyone asking. (The control, returns off, is an arm of
// gateway's TestReturnsConformance.)
func TestServerRunsReturns(t *testing.T) {
	agents := []gateway.Agent{{ID: "claude", Names: []string{"CLAUDE"}}, {ID: "chatgpt", Names: []string{"CHATGPT"}}}
	// The relay's clock runs two hours ahead: the obligation's first
	// return (one minute after it) is due at once.
	ahead := func() time.Time { return time.Now().Add(2 * time.Hour) }
	opts := &server.Options{DataDir: t.TempDir(), Agents: agents, Now: ahead,
		Returns: &gateway.ReturnsOptions{Interval: time.Minute, Returns: 1, Poll: 10 * time.Millisecond}}
	s, err := server.Open(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	e := envelope.New("CHATGPT", "CLAUDE", envelope.IntentRequest, "Review PR 7 before I ship.")
	e.Context = "g"
	e.Meta = append(e.Meta, envelope.Meta{Namespace: "obligation", Fields: []envelope.Field{{Key: "Blocks", Value: "halted"}}})
	b, err := envelope.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := post(t, s.URL(), string(b)); code != http.StatusOK {
		t.Fatalf("POST = %d %q", code, body)
	}
	returned := func() bool {
		evs, err := s.Store().Range(t.Context(), "g", 0, []string{gateway.KindNotify}, 0)
		if err != nil {
			t.Fatal(err)
		}
		return len(evs) > 0 && strings.Contains(string(evs[0].Data), gateway.NoticeObligationReturn)
	}
	defer shutdown(t, s) // waits for the scheduler to stop
	for deadline := time.Now().Add(10 * time.Second); !returned(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no return recorded within 10 s")
		}
	}
}
