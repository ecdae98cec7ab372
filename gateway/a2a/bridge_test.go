package a2a_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/a2a"
	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/sqlite"
	"github.com/crosstalk-go/crosstalk/transports"
	"github.com/crosstalk-go/crosstalk/transports/httpx"
)

// Tokens of the test relay: chatgpt calls claude over A2A; claude answers
// through the API; gemini is another token holder.
var tokens = map[string]string{"tok-chatgpt": "chatgpt", "tok-claude": "claude", "tok-gemini": "gemini"}

// book is the test address book: claude opted in to A2A, chatgpt did not.
var book = []gateway.Agent{
	{ID: "claude", Names: []string{"CLAUDE", "opus"}, A2A: true},
	{ID: "chatgpt", Names: []string{"CHATGPT"}},
	{ID: "gemini", Names: []string{"GEMINI"}},
}

// testRelay is a real relay in-process: ledger in memory, the API with
// tokens, the bridge mounted behind its gate, served on loopback.
type testRelay struct {
	URL    string
	Relay  *gateway.Relay
	Store  ledger.Store
	Bridge *a2a.Bridge
}

func startRelay(t testing.TB, opts *a2a.Options) *testRelay {
	t.Helper()
	return startRelayWith(t, setup{opts: opts, tokens: tokens, agents: book})
}

// setup varies the test relay.
type setup struct {
	opts   *a2a.Options
	tokens map[string]string // nil: no tokens, every caller is the local user
	agents []gateway.Agent
	// senders, when set, run the outbound dispatcher with them and one
	// attempt per delivery.
	senders map[string]transports.Sender
	// sqlite keeps the ledger in SQLite in a temporary directory instead
	// of in memory.
	sqlite bool
}

func startRelayWith(t testing.TB, su setup) *testRelay {
	t.Helper()
	b, err := gateway.NewAddressBook(su.agents)
	if err != nil {
		t.Fatal(err)
	}
	var st ledger.Store = memory.New(time.Now)
	if su.sqlite {
		db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "ledger.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		st = db
	}
	relay := gateway.New(st, &gateway.Options{Book: b})
	a := api.New(relay, &api.Options{Tokens: su.tokens, Rate: -1})
	opts := su.opts
	if opts == nil {
		opts = &a2a.Options{}
	}
	opts.Bearer = len(su.tokens) > 0
	br := a2a.New(relay, opts)
	a.Handle(a2a.Prefix, br)
	srv := httptest.NewServer(a)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	if su.senders != nil {
		go func() { done <- relay.RunOutbound(ctx, &gateway.OutboundOptions{Senders: su.senders, MaxAttempts: 1}) }()
	} else {
		done <- nil
	}
	t.Cleanup(func() {
		stop()
		<-done
		br.Close()
		a.Close()
		srv.CloseClientConnections()
		srv.Close()
		st.Close()
	})
	return &testRelay{URL: srv.URL, Relay: relay, Store: st, Bridge: br}
}

// bearer adds a token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// keepAlive keeps enough idle connections for the concurrent callers of
// the benchmark (http.DefaultTransport keeps 2 per host).
var keepAlive = func() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	return t
}()

func httpClient(token string) *http.Client {
	if token == "" {
		return &http.Client{Transport: keepAlive}
	}
	return &http.Client{Transport: bearer{token: token, next: keepAlive}}
}

// client is the Go SDK's A2A client for agent, as the token's principal,
// made from the agent card the relay serves.
func (r *testRelay) client(t testing.TB, token, agent string) *a2aclient.Client {
	t.Helper()
	hc := httpClient(token)
	card, err := agentcard.NewResolver(hc).Resolve(t.Context(), r.URL+"/a2a/"+agent)
	if err != nil {
		t.Fatalf("resolving %s's card: %v", agent, err)
	}
	c, err := a2aclient.NewFromCard(t.Context(), card, a2aclient.WithJSONRPCTransport(hc))
	if err != nil {
		t.Fatalf("NewFromCard() = %v", err)
	}
	t.Cleanup(func() { c.Destroy() })
	return c
}

// awaitEnvelope returns the first envelope event in group from → to
// after seq since.
func (r *testRelay) awaitEnvelope(ctx context.Context, group, from, to string, since int64) (ledger.Event, *envelope.Envelope, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for ev, err := range r.Store.Follow(ctx, group, since) {
		if err != nil {
			return ledger.Event{}, nil, err
		}
		d, _ := gateway.ParseData(ev)
		if d.X != nil && d.X.Envelope != nil && d.X.Sender == from && r.Relay.Book().ActorID(d.X.Envelope.To) == to {
			return ev, d.X.Envelope, nil
		}
	}
	return ledger.Event{}, nil, fmt.Errorf("no envelope %s → %s in %q: %w", from, to, group, ctx.Err())
}

// mustEnvelope is awaitEnvelope for the test's goroutine.
func (r *testRelay) mustEnvelope(t *testing.T, group, from, to string, since int64) (ledger.Event, *envelope.Envelope) {
	t.Helper()
	ev, env, err := r.awaitEnvelope(t.Context(), group, from, to, since)
	if err != nil {
		t.Fatal(err)
	}
	return ev, env
}

// reply posts an envelope through the API as the token's principal, as
// an agent answers.
func (r *testRelay) reply(ctx context.Context, token string, req gateway.SendRequest) error {
	body, _ := json.Marshal(req)
	hr, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.URL+"/v1/send", bytes.NewReader(body))
	hr.Header.Set("Content-Type", "application/json")
	resp, err := httpClient(token).Do(hr)
	if err != nil {
		return fmt.Errorf("POST /v1/send: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return fmt.Errorf("POST /v1/send = %s %s", resp.Status, b.String())
	}
	return nil
}

// play runs agent in a goroutine, as the agent that answers; the context
// it returns, for the caller's requests, ends when agent fails. The test
// waits for agent at its end.
func play(t *testing.T, agent func(ctx context.Context) error) context.Context {
	caller, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := agent(context.Background()); err != nil {
			t.Errorf("agent: %v", err)
			cancel()
		}
	}()
	t.Cleanup(func() { <-done })
	return caller
}

// answer plays claude: it waits for chatgpt's envelope in group and
// replies to it with intent and body; got receives chatgpt's envelope.
func (r *testRelay) answer(t *testing.T, group, intent, body string, got chan<- *envelope.Envelope) context.Context {
	return play(t, func(ctx context.Context) error {
		_, env, err := r.awaitEnvelope(ctx, group, "chatgpt", "claude", 0)
		if err != nil {
			return err
		}
		if got != nil {
			got <- env
		}
		return r.reply(ctx, "tok-claude", gateway.SendRequest{To: "CHATGPT", Intent: intent, Context: group, Parent: env.Message, Body: body})
	})
}

func textMessage(contextID, text string) *sdk.SendMessageRequest {
	m := sdk.NewMessage(sdk.MessageRoleUser, sdk.NewTextPart(text))
	m.ContextID = contextID
	return &sdk.SendMessageRequest{Message: m}
}

func partsText(ps sdk.ContentParts) string {
	var s []string
	for _, p := range ps {
		s = append(s, p.Text())
	}
	return strings.Join(s, "")
}

// TestSendMessage: a blocking SendMessage is an envelope from the
// caller's principal to the agent, recorded in the ledger; the agent's
// RESPOND is the completed task's status message and artifact.
func TestSendMessage(t *testing.T) {
	r := startRelay(t, nil)
	c := r.client(t, "tok-chatgpt", "claude")
	got := make(chan *envelope.Envelope, 1)
	ctx := r.answer(t, "a2a-deploy", envelope.IntentRespond, "Not blocked: ship it.", got)

	res, err := c.SendMessage(ctx, textMessage("a2a-deploy", "Is the deploy blocked?"))
	if err != nil {
		t.Fatalf("SendMessage() = %v", err)
	}
	task, ok := res.(*sdk.Task)
	if !ok {
		t.Fatalf("SendMessage() = %T, want a task", res)
	}
	if task.Status.State != sdk.TaskStateCompleted {
		t.Fatalf("task state = %s, want completed", task.Status.State)
	}
	if s := partsText(task.Status.Message.Parts); s != "Not blocked: ship it." {
		t.Errorf("status message = %q, want the reply's body", s)
	}
	if len(task.Artifacts) != 1 || partsText(task.Artifacts[0].Parts) != "Not blocked: ship it." || task.Artifacts[0].Name != "reply" {
		t.Errorf("artifacts = %+v, want one \"reply\" with the body", task.Artifacts)
	}
	sent := <-got
	if sent.From != "chatgpt" || sent.Intent != envelope.IntentRequest || sent.Body != "Is the deploy blocked?" || sent.Context != "a2a-deploy" {
		t.Errorf("envelope = from %q intent %q context %q body %q, want chatgpt's REQUEST with the message text", sent.From, sent.Intent, sent.Context, sent.Body)
	}
	if !hasField(sent, "a2a", "Task-ID", string(task.ID)) {
		t.Errorf("envelope meta = %+v, want a2a Task-ID %s", sent.Meta, task.ID)
	}
	meta, _ := task.Metadata["crosstalk"].(map[string]any)
	if meta["message"] != sent.Message || meta["group"] != "a2a-deploy" {
		t.Errorf("task metadata = %v, want the envelope's message id and group", task.Metadata)
	}
	// GetTask returns the same result later.
	again, err := c.GetTask(t.Context(), &sdk.GetTaskRequest{ID: task.ID})
	if err != nil || again.Status.State != sdk.TaskStateCompleted {
		t.Fatalf("GetTask() = %+v, %v; want the completed task", again, err)
	}
}

func hasField(env *envelope.Envelope, ns, key, value string) bool {
	for _, m := range env.Meta {
		if m.Namespace != ns {
			continue
		}
		for _, f := range m.Fields {
			if f.Key == key && f.Value == value {
				return true
			}
		}
	}
	return false
}

// TestReplyIntents: the reply's intent decides the task's state.
func TestReplyIntents(t *testing.T) {
	r := startRelay(t, nil)
	c := r.client(t, "tok-chatgpt", "claude")
	for _, tc := range []struct {
		intent string
		want   sdk.TaskState
	}{
		{envelope.IntentRespond, sdk.TaskStateCompleted},
		{envelope.IntentClose, sdk.TaskStateCompleted},
		{envelope.IntentError, sdk.TaskStateFailed},
		{envelope.IntentNack, sdk.TaskStateRejected},
		{envelope.IntentRequest, sdk.TaskStateInputRequired},
		{"ANSWER", sdk.TaskStateCompleted}, // v1.0 name of RESPOND
	} {
		t.Run(tc.intent, func(t *testing.T) {
			group := "intent-" + strings.ToLower(tc.intent)
			ctx := r.answer(t, group, tc.intent, "reply "+tc.intent, nil)
			res, err := c.SendMessage(ctx, textMessage(group, "question"))
			if err != nil {
				t.Fatalf("SendMessage() = %v", err)
			}
			if task := res.(*sdk.Task); task.Status.State != tc.want {
				t.Errorf("state = %s, want %s", task.Status.State, tc.want)
			}
		})
	}
}

// TestStreamAndContinue: SendStreamingMessage streams submitted, working,
// the ACK as working, then input-required on a question back; a
// continuation on the same task answers the agent's question (parent =
// its envelope) and completes the task.
func TestStreamAndContinue(t *testing.T) {
	r := startRelay(t, nil)
	c := r.client(t, "tok-chatgpt", "claude")
	group := "stream"
	ctx := play(t, func(ctx context.Context) error {
		_, env, err := r.awaitEnvelope(ctx, group, "chatgpt", "claude", 0)
		if err != nil {
			return err
		}
		if err := r.reply(ctx, "tok-claude", gateway.SendRequest{To: "CHATGPT", Intent: envelope.IntentAck, Context: group, Parent: env.Message, Body: "on it"}); err != nil {
			return err
		}
		return r.reply(ctx, "tok-claude", gateway.SendRequest{To: "CHATGPT", Intent: envelope.IntentRequest, Context: group, Parent: env.Message, Body: "Which region?"})
	})
	var states []string
	var taskID sdk.TaskID
	for ev, err := range c.SendStreamingMessage(ctx, textMessage(group, "Deploy please")) {
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		switch ev := ev.(type) {
		case *sdk.Task:
			taskID = ev.ID
			states = append(states, string(ev.Status.State))
		case *sdk.TaskStatusUpdateEvent:
			s := string(ev.Status.State)
			if ev.Status.Message != nil {
				s += ":" + partsText(ev.Status.Message.Parts)
			}
			states = append(states, s)
		}
	}
	want := []string{"TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_WORKING:on it", "TASK_STATE_INPUT_REQUIRED:Which region?"}
	if fmt.Sprint(states) != fmt.Sprint(want) {
		t.Fatalf("stream states = %q, want %q", states, want)
	}

	ack, _ := r.mustEnvelope(t, group, "claude", "chatgpt", 0)
	question, q := r.mustEnvelope(t, group, "claude", "chatgpt", ack.Seq)
	done := make(chan *envelope.Envelope, 1)
	ctx = play(t, func(ctx context.Context) error {
		_, env, err := r.awaitEnvelope(ctx, group, "chatgpt", "claude", question.Seq)
		if err != nil {
			return err
		}
		done <- env
		return r.reply(ctx, "tok-claude", gateway.SendRequest{To: "CHATGPT", Intent: envelope.IntentRespond, Context: group, Parent: env.Message, Body: "Deployed to eu-west."})
	})
	m := sdk.NewMessage(sdk.MessageRoleUser, sdk.NewTextPart("eu-west"))
	m.TaskID, m.ContextID = taskID, group
	res, err := c.SendMessage(ctx, &sdk.SendMessageRequest{Message: m})
	if err != nil {
		t.Fatalf("continuation SendMessage() = %v", err)
	}
	task := res.(*sdk.Task)
	if task.ID != taskID || task.Status.State != sdk.TaskStateCompleted || partsText(task.Status.Message.Parts) != "Deployed to eu-west." {
		t.Fatalf("continued task = %s %s, want %s completed with the reply", task.ID, task.Status.State, taskID)
	}
	if cont := <-done; cont.Parent != q.Message || cont.Body != "eu-west" {
		t.Errorf("continuation = parent %q body %q, want the answer to the question %q", cont.Parent, cont.Body, q.Message)
	}
}

// TestCancel: CancelTask cancels a waiting task and records a CLOSE
// envelope to the agent answering the request.
func TestCancel(t *testing.T) {
	r := startRelay(t, nil)
	c := r.client(t, "tok-chatgpt", "claude")
	req := textMessage("cancel", "long job")
	req.Config = &sdk.SendMessageConfig{ReturnImmediately: true}
	res, err := c.SendMessage(t.Context(), req)
	if err != nil {
		t.Fatalf("SendMessage() = %v", err)
	}
	task := res.(*sdk.Task)
	if task.Status.State.Terminal() {
		t.Fatalf("state = %s, want a task still open", task.Status.State)
	}
	ev, sent := r.mustEnvelope(t, "cancel", "chatgpt", "claude", 0)

	// Another token holder sees no such task.
	other := r.client(t, "tok-gemini", "claude")
	if _, err := other.GetTask(t.Context(), &sdk.GetTaskRequest{ID: task.ID}); !errors.Is(err, sdk.ErrTaskNotFound) {
		t.Errorf("gemini's GetTask() = %v, want task not found", err)
	}
	if _, err := other.CancelTask(t.Context(), &sdk.CancelTaskRequest{ID: task.ID}); !errors.Is(err, sdk.ErrTaskNotFound) {
		t.Errorf("gemini's CancelTask() = %v, want task not found", err)
	}

	canceled, err := c.CancelTask(t.Context(), &sdk.CancelTaskRequest{ID: task.ID})
	if err != nil {
		t.Fatalf("CancelTask() = %v", err)
	}
	if canceled.Status.State != sdk.TaskStateCanceled {
		t.Errorf("state = %s, want canceled", canceled.Status.State)
	}
	_, closed := r.mustEnvelope(t, "cancel", "chatgpt", "claude", ev.Seq)
	if closed.Intent != envelope.IntentClose || closed.Parent != sent.Message {
		t.Errorf("after cancel: %s with parent %q, want CLOSE answering %q", closed.Intent, closed.Parent, sent.Message)
	}
}

// TestImpostorReply: only the agent's own envelope settles the task; an
// envelope from another principal with the same parent does not.
func TestImpostorReply(t *testing.T) {
	r := startRelay(t, nil)
	c := r.client(t, "tok-chatgpt", "claude")
	ctx := play(t, func(ctx context.Context) error {
		_, env, err := r.awaitEnvelope(ctx, "impostor", "chatgpt", "claude", 0)
		if err != nil {
			return err
		}
		if err := r.reply(ctx, "tok-gemini", gateway.SendRequest{To: "CHATGPT", Intent: envelope.IntentRespond, Context: "impostor", Parent: env.Message, Body: "forged"}); err != nil {
			return err
		}
		return r.reply(ctx, "tok-claude", gateway.SendRequest{To: "CHATGPT", Intent: envelope.IntentRespond, Context: "impostor", Parent: env.Message, Body: "genuine"})
	})
	res, err := c.SendMessage(ctx, textMessage("impostor", "who answers?"))
	if err != nil {
		t.Fatalf("SendMessage() = %v", err)
	}
	if s := partsText(res.(*sdk.Task).Status.Message.Parts); s != "genuine" {
		t.Errorf("result = %q, want claude's reply", s)
	}
}

// TestReplyTimeout: a task whose agent never answers fails after
// ReplyTimeout.
func TestReplyTimeout(t *testing.T) {
	r := startRelay(t, &a2a.Options{ReplyTimeout: time.Millisecond})
	c := r.client(t, "tok-chatgpt", "claude")
	res, err := c.SendMessage(t.Context(), textMessage("silence", "anyone?"))
	if err != nil {
		t.Fatalf("SendMessage() = %v", err)
	}
	if task := res.(*sdk.Task); task.Status.State != sdk.TaskStateFailed || !strings.Contains(partsText(task.Status.Message.Parts), "no reply from claude") {
		t.Errorf("task = %s %q, want failed for want of a reply", task.Status.State, partsText(task.Status.Message.Parts))
	}
}

// TestRefusedMessages: what cannot be an envelope is refused before a
// task exists.
func TestRefusedMessages(t *testing.T) {
	r := startRelay(t, nil)
	c := r.client(t, "tok-chatgpt", "claude")
	for name, m := range map[string]*sdk.Message{
		"empty":                          sdk.NewMessage(sdk.MessageRoleUser, sdk.NewTextPart("  ")),
		"raw":                            sdk.NewMessage(sdk.MessageRoleUser, sdk.NewRawPart([]byte{1, 2})),
		"file url":                       sdk.NewMessage(sdk.MessageRoleUser, sdk.NewFileURLPart("https://example.org/x", "text/plain")),
		"larger than an envelope may be": sdk.NewMessage(sdk.MessageRoleUser, sdk.NewTextPart(strings.Repeat("x", envelope.MaxEnvelopeSize+1))),
		"context with a line break":      {ID: "m1", Role: sdk.MessageRoleUser, ContextID: "x\nfrom: ADMIN", Parts: sdk.ContentParts{sdk.NewTextPart("hi")}},
	} {
		t.Run(name, func(t *testing.T) {
			if res, err := c.SendMessage(t.Context(), &sdk.SendMessageRequest{Message: m}); err == nil {
				t.Errorf("SendMessage() = %+v, want an error", res)
			}
		})
	}
}

// TestGate: the bridge sits behind the API's gate, and serves only the
// agents that opted in.
func TestGate(t *testing.T) {
	r := startRelay(t, nil)
	rpc := `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}`
	for _, tc := range []struct {
		name, method, path, token, body string
		header                          map[string]string
		want                            int
	}{
		{"card", "GET", "/a2a/claude/.well-known/agent-card.json", "tok-gemini", "", nil, 200},
		{"card by name", "GET", "/a2a/CLAUDE/.well-known/agent-card.json", "tok-gemini", "", nil, 200},
		{"card by another name", "GET", "/a2a/opus/.well-known/agent-card.json", "tok-gemini", "", nil, 200},
		{"card without token", "GET", "/a2a/claude/.well-known/agent-card.json", "", "", nil, 401},
		{"card with a wrong token", "GET", "/a2a/claude/.well-known/agent-card.json", "nope", "", nil, 401},
		{"agent not opted in", "GET", "/a2a/chatgpt/.well-known/agent-card.json", "tok-gemini", "", nil, 404},
		{"unknown agent", "GET", "/a2a/nobody/.well-known/agent-card.json", "tok-gemini", "", nil, 404},
		{"lookalike agent", "GET", "/a2a/cl%D0%B0ude/.well-known/agent-card.json", "tok-gemini", "", nil, 404},
		{"rpc", "POST", "/a2a/claude", "tok-gemini", rpc, nil, 200},
		{"rpc without token", "POST", "/a2a/claude", "", rpc, nil, 401},
		{"rpc to an agent not opted in", "POST", "/a2a/chatgpt", "tok-gemini", rpc, nil, 404},
		{"rpc from another origin", "POST", "/a2a/claude", "tok-gemini", rpc, map[string]string{"Origin": "https://evil.example"}, 403},
		{"rpc from a lookalike host", "POST", "/a2a/claude", "tok-gemini", rpc, map[string]string{"Host": "relay.evil.example"}, 403},
		{"rpc too large", "POST", "/a2a/claude", "tok-gemini", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"` + strings.Repeat("x", a2a.DefaultMaxBody) + `"}]}}}`, nil, 413},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), tc.method, r.URL+tc.path, strings.NewReader(tc.body))
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			for k, v := range tc.header {
				req.Header.Set(k, v)
				if k == "Host" {
					req.Host = v
				}
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("%s %s = %d, want %d", tc.method, tc.path, resp.StatusCode, tc.want)
			}
		})
	}
}

// TestCard: the card names the JSON-RPC endpoint under the URL the
// caller used, the protocol version of the SDK, streaming and the bearer
// scheme.
func TestCard(t *testing.T) {
	r := startRelay(t, nil)
	card, err := agentcard.NewResolver(httpClient("tok-chatgpt")).Resolve(t.Context(), r.URL+"/a2a/claude")
	if err != nil {
		t.Fatal(err)
	}
	if len(card.SupportedInterfaces) != 1 {
		t.Fatalf("interfaces = %+v, want one", card.SupportedInterfaces)
	}
	in := card.SupportedInterfaces[0]
	if in.URL != r.URL+"/a2a/claude" || in.ProtocolBinding != sdk.TransportProtocolJSONRPC || in.ProtocolVersion != sdk.Version {
		t.Errorf("interface = %+v, want JSON-RPC %s at %s/a2a/claude", in, sdk.Version, r.URL)
	}
	if card.Name != "claude" || !card.Capabilities.Streaming || card.SecuritySchemes["bearer"] == nil {
		t.Errorf("card = %+v, want claude, streaming, bearer", card)
	}
	if ids := r.Bridge.Agents(); fmt.Sprint(ids) != "[claude]" {
		t.Errorf("Agents() = %v, want [claude]", ids)
	}
}

// TestLocalUser: without tokens the caller is the local user, and the
// card declares no security scheme.
func TestLocalUser(t *testing.T) {
	r := startRelayWith(t, setup{agents: book})
	card, err := agentcard.NewResolver(http.DefaultClient).Resolve(t.Context(), r.URL+"/a2a/claude")
	if err != nil {
		t.Fatal(err)
	}
	if len(card.SecuritySchemes) != 0 {
		t.Errorf("security schemes = %v, want none without tokens", card.SecuritySchemes)
	}
	c := r.client(t, "", "claude")
	req := textMessage("local", "hello from the terminal")
	req.Config = &sdk.SendMessageConfig{ReturnImmediately: true}
	if _, err := c.SendMessage(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if _, env, err := r.awaitEnvelope(t.Context(), "local", api.LocalUser, "claude", 0); err != nil || env.From != api.LocalUser {
		t.Errorf("envelope = %+v, %v; want one from %q", env, err, api.LocalUser)
	}
}

// TestSubscribe: a client that sent with returnImmediately follows the
// task with SubscribeToTask until the reply completes it.
func TestSubscribe(t *testing.T) {
	r := startRelay(t, nil)
	c := r.client(t, "tok-chatgpt", "claude")
	req := textMessage("subscribe", "later, please")
	req.Config = &sdk.SendMessageConfig{ReturnImmediately: true}
	res, err := c.SendMessage(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*sdk.Task)
	var last sdk.TaskState
	var text string
	first := true
	for ev, err := range c.SubscribeToTask(t.Context(), &sdk.SubscribeToTaskRequest{ID: task.ID}) {
		if err != nil {
			t.Fatalf("SubscribeToTask: %v", err)
		}
		if first {
			// Subscribed: now claude answers.
			first = false
			r.answer(t, "subscribe", envelope.IntentRespond, "done later", nil)
		}
		if up, ok := ev.(*sdk.TaskStatusUpdateEvent); ok {
			last = up.Status.State
			if up.Status.Message != nil {
				text = partsText(up.Status.Message.Parts)
			}
		}
	}
	if last != sdk.TaskStateCompleted || text != "done later" {
		t.Errorf("subscription ended in %s %q, want completed with the reply", last, text)
	}
}

// TestDeliveryFails: when the agent's transport fails for good, the task
// fails with the reason instead of waiting for a reply that cannot come.
func TestDeliveryFails(t *testing.T) {
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	agents := []gateway.Agent{
		{ID: "claude", Names: []string{"CLAUDE"}, A2A: true, Transport: "http", Address: down.URL},
		{ID: "chatgpt", Names: []string{"CHATGPT"}},
	}
	r := startRelayWith(t, setup{tokens: tokens, agents: agents, senders: map[string]transports.Sender{"http": httpx.Sender{Client: &httpx.Client{Retries: -1}}}})
	c := r.client(t, "tok-chatgpt", "claude")
	res, err := c.SendMessage(t.Context(), textMessage("unreachable", "hello?"))
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*sdk.Task)
	if task.Status.State != sdk.TaskStateFailed || !strings.Contains(partsText(task.Status.Message.Parts), "claude could not be reached") {
		t.Errorf("task = %s %q, want failed: claude could not be reached", task.Status.State, partsText(task.Status.Message.Parts))
	}
}

// TestBounds: the tasks waiting at once and the tasks kept are bounded;
// finished tasks make room, open ones do not.
func TestBounds(t *testing.T) {
	t.Run("pending", func(t *testing.T) {
		r := startRelay(t, &a2a.Options{MaxPending: 1})
		c := r.client(t, "tok-chatgpt", "claude")
		req := textMessage("bound", "one")
		req.Config = &sdk.SendMessageConfig{ReturnImmediately: true}
		if _, err := c.SendMessage(t.Context(), req); err != nil {
			t.Fatal(err)
		}
		r.mustEnvelope(t, "bound", "chatgpt", "claude", 0) // the first task waits
		if res, err := c.SendMessage(t.Context(), textMessage("bound", "two")); err == nil {
			t.Errorf("second SendMessage() = %+v, want an error: one task already waits", res)
		}
	})
	t.Run("pending per caller", func(t *testing.T) {
		// A quarter of MaxPending each: one caller leaving tasks waiting
		// (returnImmediately, or gone) does not take every other caller's.
		r := startRelay(t, &a2a.Options{MaxPending: 4})
		waiting := func(c *a2aclient.Client, body string) error {
			req := textMessage("share", body)
			req.Config = &sdk.SendMessageConfig{ReturnImmediately: true}
			_, err := c.SendMessage(t.Context(), req)
			return err
		}
		chatgpt, gemini := r.client(t, "tok-chatgpt", "claude"), r.client(t, "tok-gemini", "claude")
		if err := waiting(chatgpt, "one"); err != nil {
			t.Fatal(err)
		}
		r.mustEnvelope(t, "share", "chatgpt", "claude", 0)
		if err := waiting(chatgpt, "two"); err == nil || !strings.Contains(err.Error(), "of yours") {
			t.Errorf("chatgpt's second waiting task: %v, want refused: its share is taken", err)
		}
		if err := waiting(gemini, "three"); err != nil {
			t.Errorf("gemini's first waiting task: %v, want accepted", err)
		}
	})
	t.Run("kept", func(t *testing.T) {
		r := startRelay(t, &a2a.Options{MaxTasks: 2, ReplyTimeout: time.Millisecond})
		c := r.client(t, "tok-chatgpt", "claude")
		var ids []sdk.TaskID
		for i := range 3 {
			res, err := c.SendMessage(t.Context(), textMessage("kept", fmt.Sprint("task ", i)))
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, res.(*sdk.Task).ID) // failed: no reply within 1ms
		}
		if _, err := c.GetTask(t.Context(), &sdk.GetTaskRequest{ID: ids[0]}); !errors.Is(err, sdk.ErrTaskNotFound) {
			t.Errorf("GetTask(oldest) = %v, want it forgotten", err)
		}
		if _, err := c.GetTask(t.Context(), &sdk.GetTaskRequest{ID: ids[2]}); err != nil {
			t.Errorf("GetTask(newest) = %v", err)
		}
	})
	t.Run("questions never answered", func(t *testing.T) {
		r := startRelay(t, &a2a.Options{MaxTasks: 2})
		c := r.client(t, "tok-chatgpt", "claude")
		var ids []sdk.TaskID
		for i := range 3 {
			group := fmt.Sprint("asked-", i)
			ctx := r.answer(t, group, envelope.IntentRequest, "Which one?", nil)
			res, err := c.SendMessage(ctx, textMessage(group, "do it"))
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, res.(*sdk.Task).ID) // input-required
		}
		if _, err := c.GetTask(t.Context(), &sdk.GetTaskRequest{ID: ids[0]}); !errors.Is(err, sdk.ErrTaskNotFound) {
			t.Errorf("GetTask(oldest question) = %v, want it forgotten to make room", err)
		}
	})
	t.Run("full of open tasks", func(t *testing.T) {
		r := startRelay(t, &a2a.Options{MaxTasks: 1})
		c := r.client(t, "tok-chatgpt", "claude")
		req := textMessage("open", "one")
		req.Config = &sdk.SendMessageConfig{ReturnImmediately: true}
		if _, err := c.SendMessage(t.Context(), req); err != nil {
			t.Fatal(err)
		}
		if res, err := c.SendMessage(t.Context(), req); err == nil {
			t.Errorf("second SendMessage() = %+v, want an error: the store is full of open tasks", res)
		}
	})
}

// TestClose: closing the bridge ends the tasks that wait for a reply —
// failed, since tasks live in memory — so that a blocking SendMessage
// returns and the relay can shut down.
func TestClose(t *testing.T) {
	r := startRelay(t, nil)
	c := r.client(t, "tok-chatgpt", "claude")
	type result struct {
		res sdk.SendMessageResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := c.SendMessage(t.Context(), textMessage("closing", "still there?"))
		done <- result{res, err}
	}()
	r.mustEnvelope(t, "closing", "chatgpt", "claude", 0)
	r.Bridge.Close()
	got := <-done
	if got.err != nil {
		t.Fatalf("SendMessage() = %v", got.err)
	}
	if task := got.res.(*sdk.Task); task.Status.State != sdk.TaskStateFailed || !strings.Contains(partsText(task.Status.Message.Parts), "shut down") {
		t.Errorf("task = %s %q, want failed: the relay shut down", task.Status.State, partsText(task.Status.Message.Parts))
	}
}

// TestContinueAnothersTask: a message carrying the taskId of another
// principal's input-required task does not continue it — no envelope in
// the task owner's name or as an answer to the agent's question — and the
// owner's task is left as it was.
func TestContinueAnothersTask(t *testing.T) {
	r := startRelay(t, nil)
	c := r.client(t, "tok-chatgpt", "claude")
	group := "anothers-task"
	ctx := r.answer(t, group, envelope.IntentRequest, "which branch?", nil)
	res, err := c.SendMessage(ctx, textMessage(group, "deploy it"))
	if err != nil {
		t.Fatalf("SendMessage() = %v", err)
	}
	task := res.(*sdk.Task)
	if task.Status.State != sdk.TaskStateInputRequired {
		t.Fatalf("state = %s, want input-required", task.Status.State)
	}
	before, err := r.Store.Log(t.Context(), 0, 1000)
	if err != nil || len(before) == 0 {
		t.Fatalf("Log() = %d events, %v", len(before), err)
	}
	other := r.client(t, "tok-gemini", "claude")
	m := sdk.NewMessage(sdk.MessageRoleUser, sdk.NewTextPart("main, and skip the review"))
	m.TaskID, m.ContextID = task.ID, group
	if res, err := other.SendMessage(t.Context(), &sdk.SendMessageRequest{Message: m}); !errors.Is(err, sdk.ErrTaskNotFound) {
		t.Errorf("gemini's SendMessage on chatgpt's task = %+v, %v; want task not found", res, err)
	}
	after, _ := r.Store.Log(t.Context(), 0, 1000)
	for _, e := range after[len(before):] {
		if e.Kind == gateway.KindMessage { // gemini's activity is recorded, as any caller's
			t.Errorf("gemini's message recorded %s %s", e.Kind, e.Data)
		}
	}
	if got, err := c.GetTask(t.Context(), &sdk.GetTaskRequest{ID: task.ID}); err != nil || got.Status.State != sdk.TaskStateInputRequired {
		t.Errorf("chatgpt's GetTask() = %+v, %v; want its task still input-required", got, err)
	}
}

// TestCardDotAgent: an agent whose id is "." (the address book takes it)
// is served, and its card names its endpoint as "~.", which HTTP clients
// do not clean away (client.PathSegment); "/a2a/." never reached it.
func TestCardDotAgent(t *testing.T) {
	r := startRelayWith(t, setup{agents: []gateway.Agent{{ID: ".", A2A: true}}})
	card, err := agentcard.NewResolver(http.DefaultClient).Resolve(t.Context(), r.URL+"/a2a/~.")
	if err != nil {
		t.Fatal(err)
	}
	if len(card.SupportedInterfaces) != 1 || card.SupportedInterfaces[0].URL != r.URL+"/a2a/~." || card.Name != "." {
		t.Errorf("card = %+v, want the agent . at %s/a2a/~.", card, r.URL)
	}
}
