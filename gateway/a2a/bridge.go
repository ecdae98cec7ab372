package a2a

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/gateway/client"
)

// Options configure a Bridge. Nil means defaults.
type Options struct {
	// Logger receives the bridge's logs; nil discards them. Message
	// bodies are never logged.
	Logger *slog.Logger
	// Signer signs the envelopes composed for callers whose keys the
	// relay holds (as POST /v1/send does); nil sends them unsigned.
	Signer gateway.Signer
	// BaseURL is the relay's public URL ("https://relay.example.org"),
	// used for the endpoint the agent cards name. Empty means the URL the
	// caller used: http (https under TLS) and the request's Host, which
	// the API's gate has checked against the relay's names.
	BaseURL string
	// Bearer declares the bearer-token security scheme in the agent
	// cards: set it when the API has tokens.
	Bearer bool
	// ReplyTimeout is how long a task waits for the agent's reply before
	// it fails; DefaultReplyTimeout when zero.
	ReplyTimeout time.Duration
	// MaxPending bounds the tasks that wait for a reply at once, over all
	// agents; DefaultMaxPending when zero. Beyond it SendMessage fails,
	// and beyond a quarter of it for one caller (principal).
	MaxPending int
	// MaxTasks bounds the tasks each agent's endpoint keeps in memory for
	// GetTask; DefaultMaxTasks when zero. When it is full the oldest task
	// that is finished or waits for its client (input-required) is
	// forgotten; keep it above MaxPending, so that there always is one.
	MaxTasks int
	// MaxBody bounds a JSON-RPC request body; DefaultMaxBody when zero.
	MaxBody int64
}

// Defaults of Options.
const (
	DefaultReplyTimeout = 24 * time.Hour
	DefaultMaxPending   = 1000
	DefaultMaxTasks     = 10000
	// DefaultMaxBody leaves room for an envelope of the largest size
	// (envelope.MaxEnvelopeSize) with JSON escaping.
	DefaultMaxBody = 2*envelope.MaxEnvelopeSize + 64<<10
)

// Prefix is the path prefix of every A2A endpoint the bridge serves.
const Prefix = "/a2a/"

// cardPath is the agent card's path below an agent's base URL (A2A §8.2).
const cardPath = "/.well-known/agent-card.json"

// Bridge serves the A2A endpoints of the agents that opted in. It is safe
// for concurrent use.
type Bridge struct {
	relay  *gateway.Relay
	opts   Options
	log    *slog.Logger
	agents map[string]*endpoint // by lower-cased agent id
	mux    *http.ServeMux

	ctx  context.Context // ends pending tasks on Close
	stop context.CancelFunc
}

// endpoint is one agent's A2A server.
type endpoint struct {
	agent gateway.Agent
	rpc   http.Handler
}

// New returns the bridge for relay's address-book agents with A2A set.
// Mount it on the API, behind its gate, with api.Server.Handle(Prefix, b).
func New(relay *gateway.Relay, opts *Options) *Bridge {
	b := &Bridge{relay: relay, agents: map[string]*endpoint{}}
	if opts != nil {
		b.opts = *opts
	}
	if b.opts.ReplyTimeout <= 0 {
		b.opts.ReplyTimeout = DefaultReplyTimeout
	}
	if b.opts.MaxPending <= 0 {
		b.opts.MaxPending = DefaultMaxPending
	}
	if b.opts.MaxTasks <= 0 {
		b.opts.MaxTasks = DefaultMaxTasks
	}
	if b.opts.MaxBody <= 0 {
		b.opts.MaxBody = DefaultMaxBody
	}
	b.log = b.opts.Logger
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	b.ctx, b.stop = context.WithCancel(context.Background())
	// One bound over all agents (a2a-go's limiter counts per handler).
	pending := &quota{max: b.opts.MaxPending}
	for _, a := range relay.Book().Agents() {
		if !a.A2A {
			continue
		}
		ex := &executor{b: b, agent: a, pending: pending}
		h := a2asrv.NewHandler(ex,
			a2asrv.WithLogger(b.log.With("a2a_agent", a.ID)),
			a2asrv.WithTaskStore(newTaskStore(b.opts.MaxTasks)),
			a2asrv.WithCallInterceptors(callerInterceptor{}),
			a2asrv.WithExecutionPanicHandler(func(r any) error {
				b.log.Error("a2a execution panicked", "agent", a.ID, "panic", fmt.Sprint(r))
				return sdk.ErrInternalError
			}),
		)
		b.agents[strings.ToLower(a.ID)] = &endpoint{agent: a, rpc: a2asrv.NewJSONRPCHandler(h, a2asrv.WithTransportKeepAlive(15*time.Second))}
	}
	b.mux = http.NewServeMux()
	b.mux.HandleFunc("GET "+Prefix+"{agent}"+cardPath, b.card)
	b.mux.HandleFunc("POST "+Prefix+"{agent}", b.rpc)
	b.mux.HandleFunc("POST "+Prefix+"{agent}/{$}", b.rpc) // the base URL a JS client resolves the card against
	return b
}

// Agents returns the ids of the agents the bridge serves.
func (b *Bridge) Agents() []string {
	var ids []string
	for _, a := range b.relay.Book().Agents() {
		if _, ok := b.agents[strings.ToLower(a.ID)]; ok {
			ids = append(ids, a.ID)
		}
	}
	return ids
}

// Close ends every task that waits for a reply — failed, saying that the
// relay shut down — so that the requests and streams waiting on them end
// and the relay can shut down.
func (b *Bridge) Close() { b.stop() }

// ServeHTTP serves the agent cards and JSON-RPC endpoints. It must run
// behind the API's gate (api.Server.Handle), which authenticates the
// caller.
func (b *Bridge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mux.ServeHTTP(w, r)
}

// endpointOf returns the agent of the request's path, answering 404 for
// an agent that did not opt in, so that the bridge does not say which
// actors exist.
func (b *Bridge) endpointOf(w http.ResponseWriter, r *http.Request) (*endpoint, bool) {
	a, known := b.relay.Book().Agent(client.FromSegment(r.PathValue("agent"))) // by id or name
	ep, ok := b.agents[strings.ToLower(a.ID)]
	if !known || !ok {
		writeError(w, http.StatusNotFound, "not_found", "no A2A agent here")
		return nil, false
	}
	return ep, true
}

// card is GET /a2a/{agent}/.well-known/agent-card.json.
func (b *Bridge) card(w http.ResponseWriter, r *http.Request) {
	ep, ok := b.endpointOf(w, r)
	if !ok {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	json.NewEncoder(w).Encode(b.Card(ep.agent, b.baseURL(r)))
}

// baseURL is the relay's URL as the caller reaches it.
func (b *Bridge) baseURL(r *http.Request) string {
	if b.opts.BaseURL != "" {
		return strings.TrimSuffix(b.opts.BaseURL, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// Card returns the agent card of agent as served under base, the relay's
// URL: one JSON-RPC interface at base/a2a/{agent}, streaming, text in and
// out, and the bearer scheme when Options.Bearer is set.
func (b *Bridge) Card(agent gateway.Agent, base string) *sdk.AgentCard {
	c := &sdk.AgentCard{
		Name: agent.ID,
		Description: fmt.Sprintf("%s, reached through a crosstalk relay: a message becomes a crosstalk REQUEST envelope to %s, "+
			"and %s's reply envelope becomes the task's result.", agent.ID, agent.ID, agent.ID),
		SupportedInterfaces: []*sdk.AgentInterface{{
			URL: base + Prefix + client.PathSegment(agent.ID), ProtocolBinding: sdk.TransportProtocolJSONRPC, ProtocolVersion: sdk.Version,
		}},
		Capabilities:       sdk.AgentCapabilities{Streaming: true},
		DefaultInputModes:  []string{"text/plain", "application/json"},
		DefaultOutputModes: []string{"text/plain"},
		Skills: []sdk.AgentSkill{{
			ID: "crosstalk-envelope", Name: "crosstalk envelope",
			Description: "Sends the message's text to " + agent.ID + " as a crosstalk envelope and returns its reply.",
			Tags:        []string{"crosstalk"},
		}},
		Version: "1.1", // the envelope protocol's version (docs/spec)
	}
	if b.opts.Bearer {
		c.SecuritySchemes = sdk.NamedSecuritySchemes{"bearer": sdk.HTTPAuthSecurityScheme{
			Scheme: "Bearer", Description: "a crosstalk relay API token (docs/configuration.md)",
		}}
		c.SecurityRequirements = sdk.SecurityRequirementsOptions{{"bearer": sdk.SecuritySchemeScopes{}}}
	}
	return c
}

// rpc is POST /a2a/{agent}: the JSON-RPC binding, with the caller from
// the API's gate and the body bounded.
func (b *Bridge) rpc(w http.ResponseWriter, r *http.Request) {
	ep, ok := b.endpointOf(w, r)
	if !ok {
		return
	}
	p, authenticated := api.Principal(r)
	if r.ContentLength > b.opts.MaxBody {
		writeError(w, http.StatusRequestEntityTooLarge, string(envelope.CodeTooLarge), fmt.Sprintf("body larger than %d bytes", b.opts.MaxBody))
		return
	}
	// The body is read under the server's read deadline; the answer may
	// then take long (a blocking send waits for the agent's reply, a
	// stream follows the task), so the call is a stream of the API: it
	// counts against the stream limits, lifts the read deadline and ends
	// when the relay closes.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, b.opts.MaxBody))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, string(envelope.CodeTooLarge), fmt.Sprintf("body unreadable or larger than %d bytes", b.opts.MaxBody))
		return
	}
	ctx, done, ok := api.OpenStream(w, r)
	if !ok {
		return
	}
	defer done()
	r.Body = io.NopCloser(bytes.NewReader(body))
	ctx = context.WithValue(ctx, callerKey{}, caller{principal: p, authenticated: authenticated})
	ep.rpc.ServeHTTP(w, r.WithContext(ctx))
}

// caller is the principal of a request, from the API's gate.
type caller struct {
	principal     string
	authenticated bool // by token; false: the local user without tokens
}

type callerKey struct{}

// callerInterceptor makes the gate's principal the A2A call's user, so
// that the SDK's task store keeps each caller's tasks to itself.
type callerInterceptor struct {
	a2asrv.PassthroughCallInterceptor
}

// Before sets the call's user.
func (callerInterceptor) Before(ctx context.Context, cc *a2asrv.CallContext, req *a2asrv.Request) (context.Context, any, error) {
	c, ok := ctx.Value(callerKey{}).(caller)
	if !ok {
		return ctx, nil, sdk.ErrUnauthenticated
	}
	cc.User = &a2asrv.User{Name: c.principal, Authenticated: c.authenticated}
	return ctx, nil, nil
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg}})
}
