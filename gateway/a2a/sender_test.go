package a2a_test

import (
	"context"
	"errors"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/a2a"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
	"github.com/crosstalk-go/crosstalk/transports"
)

// remoteAgent is an A2A agent built with the Go SDK's server: it records
// every message it gets and completes the task, or refuses with refuse.
type remoteAgent struct {
	got    chan *sdk.Message
	refuse error
	answer string // when set, it answers at once with this message
}

func (a *remoteAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[sdk.Event, error] {
	return func(yield func(sdk.Event, error) bool) {
		if a.refuse != nil {
			yield(nil, a.refuse)
			return
		}
		a.got <- ec.Message
		if a.answer != "" {
			yield(sdk.NewMessage(sdk.MessageRoleAgent, sdk.NewTextPart(a.answer)), nil)
			return
		}
		if yield(sdk.NewSubmittedTask(ec, ec.Message), nil) {
			yield(sdk.NewStatusUpdateEvent(ec, sdk.TaskStateCompleted, nil), nil)
		}
	}
}

func (a *remoteAgent) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[sdk.Event, error] {
	return func(yield func(sdk.Event, error) bool) {
		yield(sdk.NewStatusUpdateEvent(ec, sdk.TaskStateCanceled, nil), nil)
	}
}

// startRemote serves agent with its card at /.well-known/agent-card.json
// and JSON-RPC at /invoke.
func startRemote(t *testing.T, agent *remoteAgent) string {
	t.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	card := &sdk.AgentCard{
		Name: "remote", Description: "test agent", Version: "1",
		SupportedInterfaces: []*sdk.AgentInterface{sdk.NewAgentInterface(srv.URL+"/invoke", sdk.TransportProtocolJSONRPC)},
		DefaultInputModes:   []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"}, Skills: []sdk.AgentSkill{},
	}
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	mux.Handle("/invoke", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(agent)))
	return srv.URL
}

// TestSenderDelivers: an envelope for an agent with transport "a2a"
// reaches a real A2A server as one message — id = the envelope's message
// id, text = the envelope — and the delivery is recorded.
func TestSenderDelivers(t *testing.T) {
	for _, card := range []string{"", "/.well-known/agent-card.json"} {
		t.Run("base URL"+card, func(t *testing.T) {
			agent := &remoteAgent{got: make(chan *sdk.Message, 1)}
			address := startRemote(t, agent) + card
			book, err := gateway.NewAddressBook([]gateway.Agent{
				{ID: "remote", Names: []string{"REMOTE"}, Transport: "a2a", Address: address},
				{ID: "claude", Names: []string{"CLAUDE"}},
			})
			if err != nil {
				t.Fatal(err)
			}
			st := memory.New(time.Now)
			defer st.Close()
			relay := gateway.New(st, &gateway.Options{Book: book})
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() {
				done <- relay.RunOutbound(ctx, &gateway.OutboundOptions{Senders: map[string]transports.Sender{"a2a": &a2a.Sender{}}, MinBackoff: time.Millisecond})
			}()
			defer func() { cancel(); <-done }()

			env := envelope.New("CLAUDE", "REMOTE", envelope.IntentRequest, "Can you review PR 7?")
			env.Context = "review"
			text, _ := envelope.Marshal(env)
			if _, err := relay.Ingest(t.Context(), gateway.Intake{Transport: "test", Data: strings.NewReader(string(text))}); err != nil {
				t.Fatal(err)
			}
			var m *sdk.Message
			select {
			case m = <-agent.got:
			case <-t.Context().Done():
				t.Fatal("the remote agent got no message")
			}
			got, err := envelope.Unmarshal([]byte(m.Parts[0].Text()))
			if err != nil {
				t.Fatalf("the message's text is no envelope: %v\n%s", err, m.Parts[0].Text())
			}
			if m.ID != env.Message || got.Message != env.Message || got.Body != env.Body {
				t.Errorf("message %s with envelope %s %q, want the envelope %s", m.ID, got.Message, got.Body, env.Message)
			}
			rec := awaitDelivery(t, st, "review")
			if rec.State != "delivered" || rec.ActorID != "remote" {
				t.Errorf("delivery record = %+v, want delivered to remote", rec)
			}
		})
	}
}

func awaitDelivery(t *testing.T, st ledger.Store, group string) gateway.EventData {
	t.Helper()
	for ev, err := range st.Follow(t.Context(), group, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind == gateway.KindDelivery {
			d, _ := gateway.ParseData(ev)
			return d
		}
	}
	t.Fatal("no delivery record")
	return gateway.EventData{}
}

// TestSenderErrors: what retrying cannot fix is permanent; an agent that
// is down is not.
func TestSenderErrors(t *testing.T) {
	refusing := startRemote(t, &remoteAgent{refuse: sdk.ErrUnsupportedContentType})
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()
	missing := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(missing.Close)
	// A card that points at another host: the relay does not follow it.
	target := &remoteAgent{got: make(chan *sdk.Message, 1)}
	targetURL := startRemote(t, target)
	pointer := httptest.NewServer(a2asrv.NewStaticAgentCardHandler(&sdk.AgentCard{
		Name: "pointer", Description: "points elsewhere", Version: "1", Skills: []sdk.AgentSkill{},
		DefaultInputModes: []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		SupportedInterfaces: []*sdk.AgentInterface{sdk.NewAgentInterface(targetURL+"/invoke", sdk.TransportProtocolJSONRPC)},
	}))
	t.Cleanup(pointer.Close)
	// A card on the agent's own origin whose endpoint redirects the POST
	// (307 keeps method and body) to another host.
	redirMux := http.NewServeMux()
	redirector := httptest.NewServer(redirMux)
	t.Cleanup(redirector.Close)
	redirMux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(&sdk.AgentCard{
		Name: "redirector", Description: "redirects", Version: "1", Skills: []sdk.AgentSkill{},
		DefaultInputModes: []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		SupportedInterfaces: []*sdk.AgentInterface{sdk.NewAgentInterface(redirector.URL+"/invoke", sdk.TransportProtocolJSONRPC)},
	}))
	redirMux.Handle("/invoke", http.RedirectHandler(targetURL+"/invoke", http.StatusTemporaryRedirect))
	// A card that redirects to another host's card.
	cardRedirector := httptest.NewServer(http.RedirectHandler(targetURL+a2asrv.WellKnownAgentCardPath, http.StatusFound))
	t.Cleanup(cardRedirector.Close)
	for _, tc := range []struct {
		name, to  string
		permanent bool
	}{
		{"refused by the agent", refusing, true},
		{"no card", missing.URL, true},
		{"not http", "ftp://example.org/agent", true},
		{"not a URL", "agent@example.org", true},
		{"card pointing at another host", pointer.URL, true},
		{"endpoint redirecting to another host", redirector.URL, true},
		{"card redirecting to another host", cardRedirector.URL, true},
		{"agent down", downURL, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := (&a2a.Sender{}).Send(t.Context(), tc.to, envelope.NewID(), []byte("[[A→B v1]]\nhi\n[[END]]\n"))
			if err == nil {
				t.Fatal("Send() = nil, want an error")
			}
			if got := errors.Is(err, transports.ErrPermanent); got != tc.permanent {
				t.Errorf("Send() = %v; permanent %v, want %v", err, got, tc.permanent)
			}
		})
	}
	select {
	case m := <-target.got:
		t.Errorf("the host a card pointed at got %q", m.Parts[0].Text())
	default:
	}
}

// TestSenderBoundsAnswers: an A2A agent whose answer has no end (here 64
// MiB, far above any envelope) is read only up to a bound, and the
// delivery fails saying so, instead of the relay holding the whole answer.
func TestSenderBoundsAnswers(t *testing.T) {
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(&sdk.AgentCard{
		Name: "flood", Description: "answers without end", Version: "1", Skills: []sdk.AgentSkill{},
		DefaultInputModes: []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		SupportedInterfaces: []*sdk.AgentInterface{sdk.NewAgentInterface(srv.URL+"/invoke", sdk.TransportProtocolJSONRPC)},
	}))
	mux.HandleFunc("/invoke", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":"1","result":{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"text":"`)
		chunk := strings.Repeat("a", 64<<10)
		for range 1024 {
			if _, err := io.WriteString(w, chunk); err != nil {
				return // the relay stopped reading
			}
		}
		io.WriteString(w, `"}]}}}`)
	})
	err := (&a2a.Sender{}).Send(t.Context(), srv.URL, envelope.NewID(), []byte("[[A→B v1]]\nhi\n[[END]]\n"))
	if err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("Send() = %v, want an error saying the answer is larger than the bound", err)
	}
}

// TestSenderRecordsAnswers: an A2A agent that answers at once has its
// answer recorded as its reply envelope, once however often the envelope
// is delivered.
func TestSenderRecordsAnswers(t *testing.T) {
	agent := &remoteAgent{got: make(chan *sdk.Message, 2), answer: "LGTM, merge it."}
	address := startRemote(t, agent)
	book, err := gateway.NewAddressBook([]gateway.Agent{
		{ID: "remote", Names: []string{"REMOTE"}, Transport: "a2a", Address: address},
		{ID: "claude", Names: []string{"CLAUDE"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	st := memory.New(time.Now)
	defer st.Close()
	relay := gateway.New(st, &gateway.Options{Book: book})
	env := envelope.New("CLAUDE", "REMOTE", envelope.IntentRequest, "Can you review PR 7?")
	env.Context = "review"
	text, _ := envelope.Marshal(env)
	sender := &a2a.Sender{Relay: relay}
	for range 2 { // a delivery repeated after an unclear failure
		if err := sender.Send(t.Context(), address, env.Message, text); err != nil {
			t.Fatalf("Send() = %v", err)
		}
	}
	evs, err := st.Range(t.Context(), "review", 0, nil, 100)
	if err != nil {
		t.Fatal(err)
	}
	var replies []*envelope.Envelope
	for _, ev := range evs {
		if d, _ := gateway.ParseData(ev); d.X != nil && d.X.Sender == "remote" {
			replies = append(replies, d.X.Envelope)
		}
	}
	if len(replies) != 1 {
		t.Fatalf("replies recorded = %d, want 1", len(replies))
	}
	r := replies[0]
	if r.Intent != envelope.IntentRespond || r.Parent != env.Message || r.To != "CLAUDE" || r.Body != "LGTM, merge it." {
		t.Errorf("reply = %s to %s parent %s %q, want RESPOND to CLAUDE answering %s", r.Intent, r.To, r.Parent, r.Body, env.Message)
	}
}
