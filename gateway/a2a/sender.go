package a2a

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"

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
	// 30-second timeout. The outbound dispatcher bounds each attempt too.
	Client *http.Client
	// CardTTL is how long a fetched agent card is used before it is
	// fetched again; 5 minutes when zero.
	CardTTL time.Duration

	mu    sync.Mutex
	cards map[string]cachedCard
}

type cachedCard struct {
	card    *sdk.AgentCard
	fetched time.Time
}

var _ transports.Sender = (*Sender)(nil)

var defaultClient = &http.Client{Timeout: 30 * time.Second}

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
	_, err = c.SendMessage(ctx, &sdk.SendMessageRequest{Message: msg, Config: &sdk.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		s.forget(to)
		if permanent(err) {
			return fmt.Errorf("%w: a2a: %s refused the message: %w", transports.ErrPermanent, to, err)
		}
		return fmt.Errorf("a2a: sending to %s: %w", to, err)
	}
	return nil
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
		if errors.As(err, &se) && se.StatusCode >= 400 && se.StatusCode < 500 && se.StatusCode != 408 && se.StatusCode != 429 {
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
