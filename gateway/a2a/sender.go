package a2a

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/transports"
)

// Sender delivers envelopes to A2A agents (transports.Sender) for the
// address-book transport "a2a": the address is the agent's base URL (its
// card at /.well-known/agent-card.json below it) or the URL of its card
// ("….json"); only the card's JSON-RPC interfaces on the address's own
// origin are used. Each envelope becomes one A2A SendMessage whose message
// has the envelope's message id as messageId — so that the receiver can
// recognise a retry — one text part holding the envelope text, and
// returnImmediately set: the relay does not wait for the agent's work.
// The zero value is ready to use; it is safe for concurrent use.
type Sender struct {
	// Client makes the HTTP requests; nil means a client with a
	// 30-second timeout that follows redirects on the address's origin
	// only and reads at most MaxAnswer bytes of an answer. The outbound
	// dispatcher bounds each attempt too.
	Client *http.Client
	// CardTTL is how long a fetched agent card is used before it is
	// fetched again; 5 minutes when zero.
	CardTTL time.Duration
	// Relay, when set, records what an A2A agent answers at once — a
	// message, or a task already completed, failed, rejected or
	// input-required — as that agent's reply envelope to the envelope's
	// sender (parent = the envelope), ingested like any envelope. Its
	// message id is derived from the envelope's, so that a repeated
	// delivery records it once. Nil drops such answers; the agent can
	// still send its reply to the relay.
	Relay *gateway.Relay

	mu    sync.Mutex
	cards map[string]cachedCard
}

type cachedCard struct {
	card    *sdk.AgentCard
	fetched time.Time
}

var _ transports.Sender = (*Sender)(nil)

var defaultClient = &http.Client{Timeout: 30 * time.Second, CheckRedirect: sameOriginRedirect,
	Transport: boundedTransport{http.DefaultTransport}}

// MaxAnswer bounds what the Sender's default client reads of one answer
// of an A2A agent (its card, its answer to SendMessage): room for an
// envelope of the largest size with JSON escaping, as DefaultMaxBody.
const MaxAnswer = DefaultMaxBody

// boundedTransport cuts every response body at MaxAnswer: a read past it
// fails, so that an agent answering without end costs the relay at most
// that much memory.
type boundedTransport struct{ http.RoundTripper }

// RoundTrip sends req and bounds the response's body.
func (t boundedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.RoundTripper.RoundTrip(req)
	if resp != nil && resp.Body != nil {
		resp.Body = &boundedBody{ReadCloser: resp.Body, left: MaxAnswer}
	}
	return resp, err
}

// boundedBody reads at most left bytes, then fails.
type boundedBody struct {
	io.ReadCloser
	left int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var one [1]byte
		if n, err := b.ReadCloser.Read(one[:]); n == 0 && err != nil {
			return 0, err // the answer ended at the bound
		}
		return 0, fmt.Errorf("a2a: the agent's answer is larger than %d bytes", MaxAnswer)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// errRedirect refuses a redirect to another origin: a 307 or 308 would
// post the envelope to whatever host the agent's server names, past the
// same-origin rule of the card's interfaces.
var errRedirect = errors.New("redirect to another origin refused")

// sameOriginRedirect follows a redirect only on the origin (scheme, host
// and port) of the first request.
func sameOriginRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	if first := via[0].URL; !strings.EqualFold(req.URL.Scheme, first.Scheme) || !strings.EqualFold(req.URL.Host, first.Host) {
		return fmt.Errorf("%w: %s to %s", errRedirect, first.Redacted(), req.URL.Redacted())
	}
	return nil
}

// Send delivers text, the envelope with message id id, to the A2A agent
// at to. Errors that a retry cannot fix — a URL that is not http(s), a
// card or request the agent refuses (HTTP 4xx other than 408 and 429,
// JSON-RPC invalid params, unsupported content, unauthenticated) — wrap
// transports.ErrPermanent.
func (s *Sender) Send(ctx context.Context, to, id string, text []byte) error {
	hc := s.Client
	if hc == nil {
		hc = defaultClient
	}
	card, err := s.card(ctx, hc, to)
	if err != nil {
		return err
	}
	c, err := a2aclient.NewFromCard(ctx, sameOrigin(card, to), a2aclient.WithJSONRPCTransport(hc))
	if err != nil {
		return fmt.Errorf("%w: a2a: %s offers no JSON-RPC interface of A2A %s on its own origin: %w", transports.ErrPermanent, to, sdk.Version, err)
	}
	defer c.Destroy()
	msg := sdk.NewMessage(sdk.MessageRoleUser, &sdk.Part{Content: sdk.Text(text), MediaType: "text/plain"})
	msg.ID = id
	msg.Metadata = map[string]any{metaKey: map[string]any{"message": id}}
	res, err := c.SendMessage(ctx, &sdk.SendMessageRequest{Message: msg, Config: &sdk.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		s.forget(to)
		if permanent(err) || errors.Is(err, errRedirect) {
			return fmt.Errorf("%w: a2a: %s refused the message: %w", transports.ErrPermanent, to, err)
		}
		return fmt.Errorf("a2a: sending to %s: %w", to, err)
	}
	return s.record(ctx, to, text, res)
}

// record ingests the agent's immediate answer res to the envelope text as
// its reply envelope, when there is one and Relay is set. An error (the
// ledger is unavailable) fails the delivery, which is then retried.
func (s *Sender) record(ctx context.Context, address string, text []byte, res sdk.SendMessageResult) error {
	if s.Relay == nil {
		return nil
	}
	intent, body := answerOf(res)
	if intent == "" {
		return nil // still working: nothing to record yet
	}
	orig, err := envelope.Unmarshal(text)
	if err != nil {
		return nil
	}
	var agent gateway.Agent
	for _, a := range s.Relay.Book().Agents() {
		if a.Transport == "a2a" && a.Address == address {
			agent = a
			break
		}
	}
	if agent.ID == "" {
		return nil
	}
	e := envelope.NewReply(orig, intent, body)
	e.From = agent.ID
	sum := sha256.Sum256([]byte("a2a answer\x00" + agent.ID + "\x00" + orig.Message))
	e.Message = envelope.IDFromHash(sum[:])
	b, err := envelope.Marshal(e)
	if err != nil {
		return nil // an answer that cannot be an envelope
	}
	if _, err := s.Relay.Ingest(ctx, gateway.Intake{Transport: "a2a", Source: address, Data: bytes.NewReader(b)}); err != nil {
		return fmt.Errorf("a2a: recording %s's answer: %w", agent.ID, err)
	}
	return nil
}

// answerOf is the intent and body of the reply envelope for an agent's
// immediate answer: its message; or its task's status message, else its
// artifacts, for a task that is settled or asks back. "" when the task is
// still under way.
func answerOf(res sdk.SendMessageResult) (intent, body string) {
	switch r := res.(type) {
	case *sdk.Message:
		return envelope.IntentRespond, partsText(r.Parts)
	case *sdk.Task:
		switch r.Status.State {
		case sdk.TaskStateCompleted:
			intent = envelope.IntentRespond
		case sdk.TaskStateFailed:
			intent = envelope.IntentError
		case sdk.TaskStateRejected:
			intent = envelope.IntentNack
		case sdk.TaskStateInputRequired:
			intent = envelope.IntentRequest
		default:
			return "", ""
		}
		if r.Status.Message != nil {
			body = partsText(r.Status.Message.Parts)
		}
		for _, a := range r.Artifacts {
			if body == "" && a != nil {
				body = partsText(a.Parts)
			}
		}
		if body == "" {
			body = "(" + strings.ToLower(strings.TrimPrefix(string(r.Status.State), "TASK_STATE_")) + ")"
		}
		return intent, body
	}
	return "", ""
}

// partsText is the text of an answer's parts: text, data as JSON, and a
// note for what an envelope cannot carry.
func partsText(ps sdk.ContentParts) string {
	var out []string
	for _, p := range ps {
		if p == nil {
			continue
		}
		switch c := p.Content.(type) {
		case sdk.Text:
			out = append(out, string(c))
		case sdk.Data:
			b, _ := json.Marshal(c.Value)
			out = append(out, string(b))
		case sdk.URL:
			out = append(out, "[file: "+string(c)+"]")
		default:
			out = append(out, "[binary part omitted]")
		}
	}
	return strings.Join(out, "\n\n")
}

// sameOrigin returns card with only the interfaces on the address's
// origin (scheme, host and port): the relay posts envelopes where the
// operator pointed it, and a card cannot send them to another host.
func sameOrigin(card *sdk.AgentCard, address string) *sdk.AgentCard {
	origin := func(s string) string {
		u, err := url.Parse(s)
		if err != nil {
			return ""
		}
		return strings.ToLower(u.Scheme + "://" + u.Host)
	}
	want := origin(address)
	c := *card
	c.SupportedInterfaces = nil
	for _, in := range card.SupportedInterfaces {
		if in != nil && origin(in.URL) == want {
			c.SupportedInterfaces = append(c.SupportedInterfaces, in)
		}
	}
	return &c
}

// permanent reports the A2A errors that the same request will meet again.
func permanent(err error) bool {
	for _, p := range []error{
		sdk.ErrParseError, sdk.ErrInvalidRequest, sdk.ErrMethodNotFound, sdk.ErrInvalidParams,
		sdk.ErrUnsupportedContentType, sdk.ErrUnsupportedOperation, sdk.ErrVersionNotSupported,
		sdk.ErrUnauthenticated, sdk.ErrUnauthorized, sdk.ErrExtensionSupportRequired,
	} {
		if errors.Is(err, p) {
			return true
		}
	}
	return false
}

// card returns the agent card at address, from the cache while fresh.
func (s *Sender) card(ctx context.Context, hc *http.Client, address string) (*sdk.AgentCard, error) {
	ttl := s.CardTTL
	if ttl <= 0 {
		ttl = 5 * time.Minute
	}
	s.mu.Lock()
	cc, ok := s.cards[address]
	s.mu.Unlock()
	if ok && time.Since(cc.fetched) < ttl {
		return cc.card, nil
	}
	u, err := url.Parse(address)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: a2a: address %q is not an http(s) URL", transports.ErrPermanent, address)
	}
	var opts []agentcard.ResolveOption
	if strings.HasSuffix(u.Path, ".json") {
		opts = append(opts, agentcard.WithPath(""))
	}
	card, err := agentcard.NewResolver(hc).Resolve(ctx, address, opts...)
	if err != nil {
		var se *agentcard.ErrStatusNotOK
		if errors.Is(err, errRedirect) || errors.As(err, &se) && se.StatusCode >= 400 && se.StatusCode < 500 && se.StatusCode != 408 && se.StatusCode != 429 {
			return nil, fmt.Errorf("%w: a2a: agent card of %s: %w", transports.ErrPermanent, address, err)
		}
		return nil, fmt.Errorf("a2a: agent card of %s: %w", address, err)
	}
	s.mu.Lock()
	if s.cards == nil {
		s.cards = map[string]cachedCard{}
	}
	s.cards[address] = cachedCard{card: card, fetched: time.Now()}
	s.mu.Unlock()
	return card, nil
}

// forget drops address's card, so that the next attempt fetches it anew
// (the agent may have moved).
func (s *Sender) forget(address string) {
	s.mu.Lock()
	delete(s.cards, address)
	s.mu.Unlock()
}
