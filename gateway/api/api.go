// Package api is the relay's HTTP interface (docs/design.md §5.5, §5.6): the
// envelope endpoint POST /crosstalk/receive and the JSON API under /v1 —
// group events and their Server-Sent-Events stream, agent deliveries (C2A)
// and their stream, the agent actions (ack, read, react, claim, defer,
// resolve), send, and /healthz.
//
// Every request passes the same gate, in this order: the Host header must
// be one of the relay's names (DNS rebinding); a state-changing request
// must not come from another origin (Origin, Sec-Fetch-Site); the caller is
// authenticated by bearer token when tokens are configured, and is the
// local user otherwise; each principal is rate limited. A refused request
// gets 403/401 E-PERM or 429 E-RATE — as an ERROR envelope on the envelope
// endpoint, as {"error":{…}} on /v1.
//
// Streams (SSE, the channel WebSocket) are bounded per principal and in
// total (Options.StreamLimit, MaxStreams; 429 E-RATE over them); the agent
// stream resumes from one ledger position (docs/agents.md). Every bound
// and its default is listed in docs/security.md ("Limits").
//
// It does not listen: the caller owns the http.Server, and should build it
// with NewHTTPServer, whose read deadlines streams lift for themselves; it
// must only listen on loopback when no tokens are configured.
package api

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
)

// Options configure the API. Nil means defaults.
type Options struct {
	// Logger receives request errors; nil discards them. The server adds
	// component=api to its lines, and the agents' delivery channel
	// component=channel.
	Logger *slog.Logger
	// Tokens maps bearer tokens to principals (actor ids). When empty,
	// every caller is the local user and the relay must listen on
	// loopback only.
	Tokens map[string]string
	// Minted looks up the tokens minted at run time (gateway/tokens),
	// accepted alongside Tokens. When Tokens is empty, a minted token for
	// LocalUser gives the local user's powers and any other minted token
	// its principal's; callers without a token stay the local user.
	Minted TokenLookup
	// Hosts are the accepted Host header values, with port
	// ("localhost:7777"). Empty means any loopback name: localhost,
	// 127.0.0.1 and [::1], with any port.
	Hosts []string
	// TrustedProxies are the addresses of reverse proxies in front of the
	// relay. A request from one of them counts, where the relay counts
	// callers by address (page requests without a token, cross-site
	// requests: rate limit and stream slots), as the client its
	// X-Forwarded-For names — the last address there that is not a
	// trusted proxy — instead of as the proxy, which all callers would
	// otherwise share. Empty trusts no X-Forwarded-For.
	TrustedProxies []netip.Prefix
	// Rate is the sustained requests per second allowed per principal;
	// Burst the bucket size. Zero means DefaultRate and DefaultBurst;
	// a negative Rate disables limiting.
	Rate  float64
	Burst int
	// Signer signs envelopes composed by POST /v1/send for principals
	// whose keys the relay holds; nil sends them unsigned.
	Signer gateway.Signer
	// Heartbeat is the interval of SSE comments that keep streams open;
	// DefaultHeartbeat when zero.
	Heartbeat time.Duration
	// StreamLimit bounds the open streams (SSE streams, channel
	// WebSockets) of one principal, MaxStreams those of the whole relay;
	// a stream over either gets 429 E-RATE. DefaultStreamLimit and
	// DefaultMaxStreams when zero.
	StreamLimit int
	MaxStreams  int
}

// TokenLookup resolves bearer tokens that are not in Options.Tokens:
// *tokens.Store.
type TokenLookup interface {
	Lookup(token string) (principal string, ok bool)
}

// Defaults of Options.
const (
	DefaultRate      = 500
	DefaultBurst     = 1000
	DefaultHeartbeat = 15 * time.Second
	maxJSONBody      = 2 << 20
)

// Bounds on guessing tokens: a remote address (an IPv6 /64) may present
// TokenGuessBurst unknown bearer tokens — on the API or the pages' login
// form — and then one more each 1/TokenGuessRate seconds; past that every
// token it presents, known or not, is answered 429 E-RATE unchecked, so
// that the answers tell a guesser nothing — except on a connection where
// that same token passed before (a client that keeps its connection
// open, as harnesses, the extension and MCP clients do, goes on; a
// guesser cannot make a connection of its own such). The connection's
// record needs the http.Server of NewHTTPServer. Unlike Rate they cannot
// be turned off.
const (
	TokenGuessBurst = 20
	TokenGuessRate  = 1.0
)

// ErrTokenGuesses is LoginToken's error for an address past the bounds
// on unknown tokens (TokenGuessBurst).
var ErrTokenGuesses = errors.New("too many unknown tokens from this address: wait a few seconds and try again")

// LocalUser is the principal of callers when no tokens are configured.
const LocalUser = "user"

// Server is the API handler.
type Server struct {
	relay     *gateway.Relay
	log       *slog.Logger // component=api
	logBase   *slog.Logger // Options.Logger, for the channel's component
	tokens    map[string]string
	minted    TokenLookup
	hosts     map[string]bool
	limiter   *limiter
	refusals  *refusalLog
	signer    gateway.Signer
	heartbeat time.Duration
	slots     *streamSlots
	bodies    *bodyBudget // request bodies in flight
	proxies   []netip.Prefix
	mux       *http.ServeMux
	// agentsOnce and reserveOnce make MountAgents and MountReservations
	// idempotent.
	agentsOnce, reserveOnce sync.Once

	streams context.Context // canceled by Close, ending SSE streams
	stop    context.CancelFunc

	// guesses bounds the unknown bearer tokens each remote address may
	// present (TokenGuessBurst, TokenGuessRate), on the API and the
	// pages' login form alike.
	guesses *limiter
}

// New returns the API for relay.
func New(relay *gateway.Relay, opts *Options) *Server {
	if opts == nil {
		opts = &Options{}
	}
	s := &Server{relay: relay, logBase: opts.Logger, tokens: opts.Tokens, minted: opts.Minted, signer: opts.Signer, heartbeat: opts.Heartbeat}
	if s.logBase == nil {
		s.logBase = slog.New(slog.DiscardHandler)
	}
	s.log = s.logBase.With("component", "api")
	if s.heartbeat <= 0 {
		s.heartbeat = DefaultHeartbeat
	}
	s.proxies = opts.TrustedProxies
	s.refusals = &refusalLog{log: s.log, now: time.Now, reasons: map[string]*refusalWindow{}}
	s.slots = &streamSlots{per: map[string]int{}, perMax: opts.StreamLimit, totalMax: opts.MaxStreams}
	s.bodies = newBodyBudget(int64(relay.IntakeLimit()))
	if s.slots.perMax <= 0 {
		s.slots.perMax = DefaultStreamLimit
	}
	if s.slots.totalMax <= 0 {
		s.slots.totalMax = DefaultMaxStreams
	}
	if len(opts.Hosts) > 0 {
		s.hosts = map[string]bool{}
		for _, h := range opts.Hosts {
			s.hosts[strings.ToLower(h)] = true
		}
	}
	rate, burst := opts.Rate, opts.Burst
	if rate == 0 {
		rate = DefaultRate
	}
	if burst <= 0 {
		burst = DefaultBurst
	}
	if rate > 0 {
		s.limiter = &limiter{rate: rate, burst: float64(burst), buckets: map[string]*bucket{}}
	}
	s.guesses = &limiter{rate: TokenGuessRate, burst: TokenGuessBurst, buckets: map[string]*bucket{}}
	s.streams, s.stop = context.WithCancel(context.Background())
	m := http.NewServeMux()
	m.HandleFunc("POST /crosstalk/receive", s.receive)
	m.HandleFunc("GET /healthz", s.healthz)
	m.HandleFunc("GET /v1/groups", s.groups)
	m.HandleFunc("GET /v1/groups/{group}/events", s.names(s.events))
	m.HandleFunc("GET /v1/groups/{group}/stream", s.names(s.groupStream))
	m.HandleFunc("GET /v1/agents/{agent}/deliveries", s.names(s.deliveries))
	m.HandleFunc("GET /v1/agents/{agent}/stream", s.names(s.agentStream))
	m.HandleFunc("POST /v1/groups/{group}/events/{id}/{action}", s.names(s.act))
	m.HandleFunc("POST /v1/send", s.send)
	m.HandleFunc("POST /v1/forward", s.forward)
	m.HandleFunc("/", s.unrouted)
	s.mux = m
	return s
}

// Close ends every open stream, so that http.Server.Shutdown can finish.
// In-flight appends are not interrupted.
// It also logs the count of gate refusals not yet reported.
func (s *Server) Close() {
	s.stop()
	s.refusals.flush()
}

type ctxKey int

const principalKey ctxKey = 0

// principal is the authenticated caller of a request: an actor id, or
// LocalUser without tokens. authenticated reports whether it came from a
// token.
func principal(r *http.Request) (p string, authenticated bool) {
	v, _ := r.Context().Value(principalKey).(authInfo)
	return v.principal, v.token
}

type authInfo struct {
	principal string
	token     bool
	// key is what the caller is counted as for rate and stream limits:
	// the principal, or "anonymous ADDRESS" (an IPv6 /64) for a page request without one.
	key string
	// release ends the request's count against the bounds on bodies in
	// flight (bodyBudget); the gate's caller calls it when the request
	// is served.
	release func()
}

// ServeHTTP applies the gate, then routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	info, ok := s.gate(w, r, false)
	if !ok {
		return
	}
	defer info.release()
	if info.token {
		s.relay.Touch(info.principal)
	}
	if err := decodeAgentHeader(r); err != nil {
		if r.URL.Path == "/crosstalk/receive" {
			s.errorEnvelope(w, r, http.StatusBadRequest, envelope.CodeAddress, err.Error())
		} else {
			writeError(w, http.StatusBadRequest, string(envelope.CodeAddress), err.Error())
		}
		return
	}
	s.mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey, info)))
}

// gate applies the checks every request passes, in this order: Host,
// Origin for state-changing methods (for every method from a browser
// extension, which must bring a valid bearer token instead), bearer token,
// rate limit. It answers a refused request itself (an ERROR envelope on the
// envelope endpoint, JSON elsewhere) and returns false. page relaxes one point for browser pages
// when tokens are configured: a request without an Authorization header
// passes with an empty principal (the pages authenticate it by session
// cookie) and is rate limited by remote address; a wrong token is refused.
func (s *Server) gate(w http.ResponseWriter, r *http.Request, page bool) (authInfo, bool) {
	fail := func(reason string, status int, code envelope.Code, msg string) (authInfo, bool) {
		s.refusals.refused(r, reason, status, code)
		if r.URL.Path == "/crosstalk/receive" {
			s.errorEnvelope(w, r, status, code, msg)
		} else {
			writeError(w, status, string(code), msg)
		}
		return authInfo{}, false
	}
	if !s.hostAllowed(r.Host) {
		return fail("host", http.StatusForbidden, envelope.CodePerm, fmt.Sprintf("host %q is not one of the relay's names", r.Host))
	}
	h := r.Header.Get("Authorization")
	tok, bearer := strings.CutPrefix(h, "Bearer ")
	var p string
	var known bool
	if bearer && r.URL.Path != "/healthz" {
		var err error
		if p, known, err = s.LoginToken(r, tok); err != nil {
			w.Header().Set("Retry-After", "1")
			return fail("token", http.StatusTooManyRequests, envelope.CodeRate, err.Error())
		}
	} else {
		p, known = s.TokenPrincipal(tok)
	}
	// A browser extension's background has no same origin; its valid
	// bearer token stands in for it. Without one it is refused, whatever
	// the method (docs/web.md, "Browser extension").
	extension := isExtensionOrigin(r.Header.Get("Origin"))
	if extension {
		if !bearer || !known {
			return fail("origin", http.StatusForbidden, envelope.CodePerm, "cross-origin request refused: a browser extension needs a valid bearer token")
		}
	} else if r.Method != http.MethodGet && r.Method != http.MethodHead && !s.sameOrigin(r) {
		return fail("origin", http.StatusForbidden, envelope.CodePerm, "cross-origin request refused")
	}
	// A browser's request from another site that only reads: a page of
	// the web inbox is a link's target (the pages answer it, holding no
	// stream), counted apart from the caller so that another site cannot
	// spend its rate limit; the API is never one, and a read from
	// another site would only hold the caller's stream slots and spend
	// its rate limit, the answer being unreadable there.
	crossSite := !extension && r.Header.Get("Sec-Fetch-Site") == "cross-site"
	if crossSite && !page {
		return fail("origin", http.StatusForbidden, envelope.CodePerm, "cross-site request refused")
	}
	info, key := authInfo{principal: LocalUser}, LocalUser
	switch {
	case len(s.tokens) > 0 && r.URL.Path != "/healthz":
		if page && h == "" {
			info, key = authInfo{}, anonymousKey+s.remotePrefix(r)
		} else {
			if !bearer || !known {
				w.Header().Set("WWW-Authenticate", `Bearer realm="crosstalk"`)
				return fail("token", http.StatusUnauthorized, envelope.CodePerm, "missing or unknown bearer token")
			}
			info, key = authInfo{principal: p, token: true}, p
		}
	case bearer && !known && r.URL.Path != "/healthz":
		// No tokens configured, but one was presented: it must be valid,
		// or a client with a revoked or mistyped token would pass unnoticed.
		w.Header().Set("WWW-Authenticate", `Bearer realm="crosstalk"`)
		return fail("token", http.StatusUnauthorized, envelope.CodePerm, "unknown bearer token")
	case known && p != LocalUser:
		// A minted token on a relay without configured tokens: its
		// principal. One minted for the local user keeps the local powers.
		info, key = authInfo{principal: p, token: true}, p
	}
	if crossSite {
		key = anonymousKey + s.remotePrefix(r)
	}
	if s.limiter != nil && !s.limiter.allow(key, time.Now()) {
		w.Header().Set("Retry-After", "1")
		return fail("rate", http.StatusTooManyRequests, envelope.CodeRate, "rate limit exceeded for "+key)
	}
	info.key = key
	release, status, why := s.bodies.admit(r, key)
	if release == nil {
		w.Header().Set("Retry-After", "1")
		return fail("bodies", status, envelope.CodeRate, why)
	}
	info.release = release
	return info, true
}

// LoginToken checks a token r presents, a bearer token (the gate) or one
// typed into a login form: the principal of a known token; ok false for
// an unknown one, which counts against r's remote address; and
// ErrTokenGuesses, with the token unchecked, for an address past the
// bounds on unknown tokens (TokenGuessBurst, TokenGuessRate), unless the
// token passed before on r's connection (NewHTTPServer's).
func (s *Server) LoginToken(r *http.Request, token string) (principal string, ok bool, err error) {
	key := anonymousKey + s.remotePrefix(r)
	now := s.relay.Now()
	conn, _ := r.Context().Value(connKey{}).(*connTokens)
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	if s.guesses.spent(key, now) && !conn.has(sum) {
		return "", false, ErrTokenGuesses
	}
	principal, ok = s.TokenPrincipal(token)
	if ok {
		conn.add(sum)
	} else {
		s.guesses.allow(key, now)
	}
	return principal, ok, nil
}

// connKey is the context key of a connection's connTokens.
type connKey struct{}

// connTokens are the tokens (their SHA-256) that passed on one
// connection: at most maxConnTokens, the first ones. The tokens, not a
// flag that one passed: a token holder must not guess other principals'
// tokens at full speed on its own connection.
type connTokens struct {
	mu   sync.Mutex
	sums [][sha256.Size]byte
}

// maxConnTokens bounds the tokens one connection remembers.
const maxConnTokens = 4

// withConnTokens is NewHTTPServer's ConnContext: every connection gets
// its record of the tokens that passed on it.
func withConnTokens(ctx context.Context, _ net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, &connTokens{})
}

// has reports whether the token of SHA-256 sum passed on the connection;
// false without a record (a server not made by NewHTTPServer).
func (c *connTokens) has(sum [sha256.Size]byte) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Contains(c.sums, sum)
}

// add records that the token of SHA-256 sum passed on the connection.
func (c *connTokens) add(sum [sha256.Size]byte) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.sums) < maxConnTokens && !slices.Contains(c.sums, sum) {
		c.sums = append(c.sums, sum)
	}
}

func (s *Server) hostAllowed(host string) bool {
	host = strings.ToLower(host)
	if s.hosts != nil {
		return s.hosts[host]
	}
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		h = host
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	return h == "localhost" || h == "127.0.0.1" || h == "::1"
}

// isExtensionOrigin reports an Origin of a browser extension's pages and
// background: chrome-extension:// (Chromium-based browsers) or
// moz-extension:// (Firefox).
func isExtensionOrigin(origin string) bool {
	return strings.HasPrefix(origin, "chrome-extension://") || strings.HasPrefix(origin, "moz-extension://")
}

// sameOrigin refuses browsers' cross-site requests: Sec-Fetch-Site
// cross-site, or an Origin whose host is not the request's own allowed
// host. Non-browser clients send neither header.
func (s *Server) sameOrigin(r *http.Request) bool {
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	if origin == "null" {
		return false
	}
	host, ok := strings.CutPrefix(origin, "http://")
	if !ok {
		host, ok = strings.CutPrefix(origin, "https://")
	}
	return ok && strings.EqualFold(host, r.Host) && s.hostAllowed(host)
}

// unrouted answers a request no endpoint took, as the API's JSON error:
// 405 with Allow when the path is served for other methods, else 404.
func (s *Server) unrouted(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range [...]string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != "/" && pattern != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) == 0 {
		writeError(w, http.StatusNotFound, gateway.CodeNotFound, "no endpoint at "+r.URL.Path)
		return
	}
	w.Header().Set("Allow", strings.Join(allow, ", "))
	writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", fmt.Sprintf("%s is not allowed on %s; use %s", r.Method, r.URL.Path, strings.Join(allow, ", ")))
}

// limiter is a token bucket per principal.
type limiter struct {
	mu      sync.Mutex
	rate    float64
	burst   float64
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

// anonymousKey prefixes the limiter key of a page request without a
// token, which is limited by its remote address.
const anonymousKey = "anonymous "

// maxBuckets bounds the limiter's buckets: one per principal, and one per
// remote address of page requests without a token, of which a relay
// running for a year (or one IPv6 network, a /64 each) has more than memory holds.
const maxBuckets = 1 << 14

func (l *limiter) allow(key string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[key]
	if !ok {
		if len(l.buckets) >= maxBuckets {
			l.evictLocked(now)
		}
		b = &bucket{tokens: l.burst, last: now}
		l.buckets[key] = b
	}
	b.tokens, b.last = l.level(b, now), now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// spent reports whether key's bucket holds less than one token at now,
// taking nothing.
func (l *limiter) spent(key string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[key]
	return ok && l.level(b, now) < 1
}

// level returns what b holds at now: refilled at l's rate since it was
// last taken from, up to l's burst.
func (l *limiter) level(b *bucket, now time.Time) float64 {
	return math.Min(l.burst, b.tokens+now.Sub(b.last).Seconds()*l.rate)
}

// evictLocked makes room for new buckets: it drops those that have
// refilled (a full bucket is what a new one would be), and if that leaves
// the limiter more than half full, anonymous addresses' buckets until it
// is half full. Principals' buckets are never dropped while spent, so a
// flood of addresses gives no principal a fresh burst; there are only as
// many of them as tokens. Halving keeps the work of eviction constant per
// new bucket.
func (l *limiter) evictLocked(now time.Time) {
	for k, b := range l.buckets {
		if l.level(b, now) >= l.burst {
			delete(l.buckets, k)
		}
	}
	for k := range l.buckets {
		if len(l.buckets) <= maxBuckets/2 {
			break
		}
		if strings.HasPrefix(k, anonymousKey) {
			delete(l.buckets, k)
		}
	}
}

// writeJSON writes v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

// apiError is the JSON error body (CCCS §11 shape).
type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Line    int    `json:"line,omitempty"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]apiError{"error": {Code: code, Message: msg}})
}

// statusOf maps an error code to the HTTP status of docs/design.md §5.5.
func statusOf(code envelope.Code) int {
	switch code {
	case envelope.CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	case envelope.CodePerm, envelope.CodeConsent:
		return http.StatusForbidden
	case envelope.CodeRate:
		return http.StatusTooManyRequests
	case envelope.CodeRoute:
		return http.StatusBadGateway
	case envelope.CodeTimeout:
		return http.StatusGatewayTimeout
	}
	return http.StatusBadRequest
}

// actionStatus maps an action error to an HTTP status.
func actionStatus(err error) (int, string, string) {
	var ae *gateway.ActionError
	if !errors.As(err, &ae) {
		return http.StatusInternalServerError, gateway.CodeInternal, err.Error()
	}
	switch ae.Code {
	case gateway.CodeNotFound:
		return http.StatusNotFound, ae.Code, ae.Reason
	case gateway.CodePermission:
		return http.StatusForbidden, ae.Code, ae.Reason
	case gateway.CodeConflict:
		return http.StatusConflict, ae.Code, ae.Reason
	}
	return http.StatusBadRequest, ae.Code, ae.Reason
}
