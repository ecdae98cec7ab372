package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/a2a"
	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/jetstream"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/sqlite"
	"github.com/crosstalk-go/crosstalk/gateway/metrics"
	"github.com/crosstalk-go/crosstalk/gateway/projection"
	"github.com/crosstalk-go/crosstalk/gateway/reserve"
	"github.com/crosstalk-go/crosstalk/gateway/tokens"
	"github.com/crosstalk-go/crosstalk/gateway/web"
	"github.com/crosstalk-go/crosstalk/signing"
	"github.com/crosstalk-go/crosstalk/transports"
)

// DefaultListen is the relay's default address: loopback only.
const DefaultListen = "127.0.0.1:7777"

// DNSServerNone is the Options.DNSServer (and dns_server) value that
// turns DNS key lookups off.
const DNSServerNone = "none"

// Options configure a relay. DataDir is required; everything else has a
// default. docs/configuration.md documents the configuration file fields
// these come from.
type Options struct {
	// Listen is the HTTP address; "127.0.0.1:0" (a free loopback port)
	// when empty. Without Tokens it must be a loopback address.
	Listen string
	// DataDir holds the SQLite ledger, the trust store and the folder
	// transport's directories unless they are named elsewhere. It is
	// created (0700) if missing.
	DataDir string
	// Ledger is a SQLite file, or nats:// URLs for a shared JetStream
	// ledger; DataDir/ledger.db when empty or "sqlite". LedgerStream and
	// LedgerReplicas configure the JetStream stream.
	Ledger         string
	LedgerStream   string
	LedgerReplicas int
	// Name is the sender of the relay's receipts and errors; "SYSTEM"
	// when empty.
	Name string
	// Hosts are Host header names the API accepts besides localhost,
	// 127.0.0.1 and [::1] with the listen port; a name without a port is
	// accepted with the listen port and without one (as a reverse proxy on
	// the default port forwards it).
	Hosts []string
	// TrustedProxies are reverse proxies whose X-Forwarded-For names the
	// caller where the relay counts callers by address
	// (api.Options.TrustedProxies).
	TrustedProxies []netip.Prefix
	// TrustFile is the TOFU trust store; DataDir/known_keys when empty.
	TrustFile string
	// Verifier checks signatures; when nil, a signing.Verifier over
	// TrustFile (trust on first use, docs/signing.md) that looks keys up
	// in DNS as DNSServer says.
	Verifier gateway.Verifier
	// DNSServer is the "host:port" of the DNS server asked for signing
	// keys published in TXT records (docs/signing.md §6); empty: the
	// system's servers; DNSServerNone: no DNS lookups.
	DNSServer string
	// RequireSignatures rejects envelopes that are not verified.
	RequireSignatures bool
	// RateLimit and RateBurst limit requests per principal (api.Options).
	RateLimit float64
	RateBurst int
	// ClaimTTL is how long a claim lasts; gateway.DefaultClaimTTL when
	// zero.
	ClaimTTL time.Duration
	// StaleAfter is the agents' liveness stale threshold, eviction at
	// twice it (package liveness); attention.StaleAfter when zero.
	StaleAfter time.Duration
	// MaxBody bounds one intake in bytes, MaxEnvelopes its envelopes
	// (gateway.Options); the package defaults when zero.
	MaxBody      int
	MaxEnvelopes int
	// StreamLimit bounds the open streams of one principal, MaxStreams
	// those of the relay (api.Options); the package defaults when zero.
	StreamLimit int
	MaxStreams  int
	// Timeouts are the HTTP connection deadlines; api's defaults when
	// zero.
	Timeouts api.Timeouts
	// Groups maps envelope contexts to ledger groups.
	Groups map[string]string
	// Tokens maps the API's bearer tokens to principals.
	Tokens map[string]string
	// Admins are the token principals that may change the trust store on
	// the web inbox and revoke any key.
	Admins []string
	// SecureCookies marks the web inbox's session cookie Secure on plain
	// HTTP too (behind a TLS-terminating proxy).
	SecureCookies bool
	// Agents is the address book.
	Agents []gateway.Agent
	// SigningKeys are the private keys, by agent id, the relay signs that
	// agent's POST /v1/send envelopes with.
	SigningKeys map[string]*signing.PrivateKey
	// Folder, Clipboard and Mail are the transports beyond HTTP
	// (docs/transports.md); a nil Folder or Mail is off.
	Folder    *FolderOptions
	Clipboard ClipboardOptions
	Mail      *MailOptions
	// Receivers and Senders add transports of the caller's own, by name;
	// a name used by a built-in transport replaces it.
	Receivers map[string]transports.Receiver
	Senders   map[string]transports.Sender
	// Store, when set, is the ledger instead of the one Ledger names
	// (an in-memory one in tests); Shutdown closes it.
	Store ledger.Store
	// Now is the relay's clock; time.Now when nil.
	Now func() time.Time
	// Heartbeat is the interval of the comments that keep streams open;
	// api.DefaultHeartbeat when zero.
	Heartbeat time.Duration
	// Channel bounds the agents' delivery channel (api.AgentOptions);
	// nil is the defaults.
	Channel *api.AgentOptions
	// Logger receives the relay's logs; nil discards them.
	Logger *slog.Logger
	// Returns runs the returns and escalation of undischarged obligations
	// (gateway.Relay.RunReturns); nil or Returns ≤ 0 is off.
	Returns *gateway.ReturnsOptions
}

// ErrNotLoopback reports a non-loopback Listen address without Tokens:
// without tokens every caller is the local user, so the relay must not be
// reachable from elsewhere.
var ErrNotLoopback = errors.New("server: without tokens the relay listens on loopback only")

// IsLoopback reports whether host ("localhost", "127.0.0.1", "::1", …) is
// a loopback name or address.
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (o *Options) logger() *slog.Logger {
	if o.Logger != nil {
		return o.Logger
	}
	return slog.New(slog.DiscardHandler)
}

func (o *Options) trustFile() string {
	if o.TrustFile != "" {
		return o.TrustFile
	}
	return filepath.Join(o.DataDir, "known_keys")
}

// LedgerSpec is the ledger Open uses: Ledger, or the SQLite file in
// DataDir.
func (o *Options) LedgerSpec() string {
	if o.Ledger == "" || o.Ledger == "sqlite" {
		return filepath.Join(o.DataDir, "ledger.db")
	}
	return o.Ledger
}

// Core is a relay without listeners or transports: its ledger, verifier
// and address book. `crosstalk mcp --data` and `crosstalk harness --data`
// serve one agent over it.
type Core struct {
	// Relay is the relay over Store.
	Relay *gateway.Relay
	// Store is the ledger backend.
	Store ledger.Store
	// Trust is the trust store the default verifier pins keys in.
	Trust *signing.TrustStore

	proj *projection.DB // nil when in memory (the relay's own)
}

// OpenCore opens the ledger and builds the relay over it, with the
// verifier and address book of o. Close releases it.
func OpenCore(ctx context.Context, o *Options) (*Core, error) {
	return openCore(ctx, o, nil)
}

// openCore is OpenCore, with the ledger and the relay observed by mx when
// not nil.
func openCore(ctx context.Context, o *Options, mx *metrics.Metrics) (*Core, error) {
	if o.DataDir == "" {
		return nil, errors.New("server: Options.DataDir is empty")
	}
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	book, err := gateway.NewAddressBook(o.Agents)
	if err != nil {
		return nil, fmt.Errorf("agents: %w", err)
	}
	log := o.logger()
	trust := signing.NewTrustStore(o.trustFile())
	// A trust file that turns bad while the relay runs (a hand edit) is
	// an error in the log, and verification goes on with its last good
	// version — pins and revocations stay in force — until it is fixed;
	// one that is bad at start stops the start (docs/signing.md §5).
	trustLog := log.With("component", "trust", "file", o.trustFile())
	trust.OnBadFile = func(err error) {
		if err != nil {
			trustLog.Error("trust store unreadable: verifying with its last good version; pins and revocations fail until the file is fixed", "err", err)
		} else {
			trustLog.Info("trust store readable again")
		}
	}
	if _, err := trust.Entries(); err != nil {
		return nil, fmt.Errorf("trust store: %w", err)
	}
	verifier := o.Verifier
	if verifier == nil {
		v := &signing.Verifier{Store: trust, Logger: log.With("component", "trust")}
		if o.DNSServer != DNSServerNone {
			v.DNS = signing.NewDNSKeys(o.DNSServer)
		}
		verifier = gateway.NewTrustVerifier(v)
	}
	store := o.Store
	// A ledger the relay opens gets its projections in a file beside it,
	// caught up from their high-water mark; a store given by the caller
	// gets them in memory.
	var proj *projection.DB
	if store == nil {
		if store, err = OpenLedger(ctx, LedgerOptions{Spec: o.LedgerSpec(), Stream: o.LedgerStream, Replicas: o.LedgerReplicas, Logger: log.With("component", "ledger")}); err != nil {
			return nil, err
		}
		if proj, err = openProjection(ctx, ProjectionPath(o.LedgerSpec(), o.LedgerStream, o.DataDir), log); err != nil {
			store.Close()
			return nil, err
		}
	}
	gopts := &gateway.Options{
		Logger: log, Book: book, Verifier: verifier, // it names its components
		Groups: o.Groups, RequireSignature: o.RequireSignatures, Name: o.Name, Admins: o.Admins,
		ClaimTTL: o.ClaimTTL, StaleAfter: o.StaleAfter, MaxIntake: o.MaxBody, MaxEnvelopes: o.MaxEnvelopes, Now: o.Now,
		Projection: proj,
	}
	observed := store
	if mx != nil {
		observed, gopts.Observer = mx.Store(store), mx
	}
	relay := gateway.New(observed, gopts)
	if mx != nil {
		mx.WatchRelay(relay)
		switch st := store.(type) {
		case *jetstream.Store:
			mx.WatchJetStream(st.Conn(), o.LedgerStream)
		case *sqlite.Store:
			mx.WatchSQLite(st)
		}
	}
	return &Core{Relay: relay, Store: store, Trust: trust, proj: proj}, nil
}

// Close closes the ledger and the projections.
func (c *Core) Close() error {
	err := c.Relay.Quiesce(context.Background())
	err = errors.Join(err, c.Store.Close())
	if c.proj != nil {
		err = errors.Join(err, c.proj.Close())
	}
	return err
}

// Server is a running relay: its HTTP listener (API and web inbox), its
// transports and outbound dispatcher, over a Core.
type Server struct {
	core    *Core
	url     string
	http    *http.Server
	api     *api.Server
	a2a     *a2a.Bridge
	handler http.Handler
	log     *slog.Logger
	done    chan error
	// stop ends the background tasks (outbound dispatcher, receivers);
	// tasks is done when they have returned.
	stop     context.CancelFunc
	tasks    sync.WaitGroup
	shutOnce sync.Once
	shutErr  error
}

// Open builds the relay o describes and starts serving. It returns once
// the listener is up; Shutdown stops it. On error nothing is left open.
func Open(ctx context.Context, o *Options) (*Server, error) {
	listen := o.Listen
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("listen: %q is not host:port", listen)
	}
	if len(o.Tokens) == 0 && !IsLoopback(host) {
		return nil, fmt.Errorf("listen %q: %w", listen, ErrNotLoopback)
	}
	log := o.logger()
	ts, err := buildTransports(o, log)
	if err != nil {
		return nil, err
	}
	mx := metrics.New(&metrics.Options{Logger: log.With("component", "metrics")})
	core, err := openCore(ctx, o, mx)
	if err != nil {
		return nil, err
	}
	s, err := serve(ctx, o, core, mx, listen, ts, log)
	if err != nil {
		core.Close()
		return nil, err
	}
	return s, nil
}

func serve(ctx context.Context, o *Options, core *Core, mx *metrics.Metrics, listen string, ts *transportSet, log *slog.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	hosts := []string{"localhost:" + port, "127.0.0.1:" + port, "[::1]:" + port}
	for _, h := range o.Hosts {
		if _, _, err := net.SplitHostPort(h); err == nil {
			hosts = append(hosts, h)
			continue
		}
		// A name without a port is the name on the listen port, and as a
		// reverse proxy on the scheme's default port forwards it: browsers
		// leave out a default port, so Host has none.
		bare := strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
		hosts = append(hosts, net.JoinHostPort(bare, port))
		if strings.Contains(bare, ":") {
			bare = "[" + bare + "]"
		}
		hosts = append(hosts, bare)
	}
	minted := tokens.Open(filepath.Join(o.DataDir, tokens.FileName)) // crosstalk token new, the trust page's button
	a := api.New(core.Relay, &api.Options{
		Logger: log, Tokens: o.Tokens, Hosts: hosts, TrustedProxies: o.TrustedProxies,
		Rate: o.RateLimit, Burst: o.RateBurst, Signer: keySigner(o.SigningKeys),
		StreamLimit: o.StreamLimit, MaxStreams: o.MaxStreams, Minted: minted, Heartbeat: o.Heartbeat,
	})
	a.MountAgents(o.Channel) // the JSON-RPC channel, agent list, cursors, heartbeats (docs/agents.md)
	resv, err := reserve.NewService(ctx, core.Relay.Store(), reserve.Options{Now: o.Now, Policy: core.Relay.ReservePolicy()})
	if err != nil {
		a.Close()
		ln.Close()
		return nil, fmt.Errorf("reservations: %w", err)
	}
	a.MountReservations(resv) // scope reservations (docs/agents.md "Reservations")
	a.Handle("GET /metrics", mx.Handler())
	if s, ok := ts.senders["a2a"].(*a2a.Sender); ok {
		s.Relay = core.Relay // record what A2A agents answer at once
	}
	bridge := a2a.New(core.Relay, &a2a.Options{Logger: log.With("component", "a2a"), Signer: keySigner(o.SigningKeys), Bearer: len(o.Tokens) > 0})
	a.Handle(a2a.Prefix, bridge) // A2A cards and endpoints of the agents with A2A set (docs/agents.md)
	site, err := web.New(core.Relay, a, &web.Options{
		Logger: log.With("component", "web"), Trust: core.Trust,
		Admins: o.Admins, Secure: o.SecureCookies, Heartbeat: o.Heartbeat, Tokens: minted, Reservations: resv,
	})
	if err != nil {
		bridge.Close()
		a.Close()
		ln.Close()
		return nil, err
	}
	hs := api.NewHTTPServer(mx.Middleware(site), o.Timeouts, slog.NewLogLogger(log.Handler(), slog.LevelWarn))
	s := &Server{core: core, url: "http://" + net.JoinHostPort("127.0.0.1", port), http: hs, api: a, a2a: bridge, handler: site, log: log, done: make(chan error, 1)}
	if host, _, _ := net.SplitHostPort(listen); !IsLoopback(host) {
		s.url = "http://" + ln.Addr().String()
	}
	go func() { s.done <- hs.Serve(ln) }()
	bg, stop := context.WithCancel(context.WithoutCancel(ctx))
	s.stop = stop
	s.tasks.Go(func() {
		if err := core.Relay.RunOutbound(bg, &gateway.OutboundOptions{Senders: ts.senders}); err != nil {
			log.Error("outbound dispatcher stopped", "err", err)
		}
	})
	if o.Returns != nil && o.Returns.Returns > 0 {
		s.tasks.Go(func() {
			if err := core.Relay.RunReturns(bg, o.Returns); err != nil {
				log.Error("obligation returns stopped", "err", err)
			}
		})
	}
	s.tasks.Go(func() {
		// Digest events of the agents with a digest interval (docs/agents.md,
		// "Buffered and digest delivery").
		if err := core.Relay.RunDigests(bg); err != nil {
			log.Error("digests stopped", "err", err)
		}
	})
	s.tasks.Go(func() {
		// The projections catch up from their high-water mark (from the
		// start when absent): now rather than in the first request.
		if err := core.Relay.SyncProjection(bg); err != nil && bg.Err() == nil {
			log.Warn("catching up the ledger's projections", "err", err)
		}
	})
	// The liveness sweeper records stale and evicted transitions, which no
	// heartbeat does (package liveness; docs/agents.md "Liveness").
	s.tasks.Go(func() { core.Relay.Liveness().Run(bg) })
	for name, recv := range ts.receivers {
		s.tasks.Go(func() {
			log.Info("receiving", "transport", name)
			if err := recv.Receive(bg, core.Relay.Handler()); err != nil {
				log.Error("receiver stopped", "transport", name, "err", err)
			}
		})
	}
	log.Info("relay listening", "url", s.url, "ledger", o.LedgerSpec(), "trust", o.trustFile(), "tokens", len(o.Tokens), "agents", len(o.Agents))
	return s, nil
}

// URL is the relay's base URL, e.g. "http://127.0.0.1:7777".
func (s *Server) URL() string { return s.url }

// Handler is the relay's HTTP handler: the API and the web inbox. It is
// also served at URL.
func (s *Server) Handler() http.Handler { return s.handler }

// Relay is the relay behind the handler.
func (s *Server) Relay() *gateway.Relay { return s.core.Relay }

// Store is the ledger backend.
func (s *Server) Store() ledger.Store { return s.core.Store }

// Shutdown stops the relay within ctx (docs/operations.md): it ends the
// open streams, stops accepting connections and waits for the requests in
// flight — and so their appends — to finish while the background tasks
// (outbound dispatcher, receivers) stop, then closes the ledger, which
// commits the appends already queued. Draining may take three quarters of
// the time ctx leaves (DefaultShutdownTimeout when it has no deadline);
// past that the remaining connections are closed, and the ledger is closed
// all the same. It returns an error naming what did not finish in time;
// what was acknowledged is durable either way. Calling it again returns
// the first call's result.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutOnce.Do(func() { s.shutErr = s.shutdown(ctx) })
	return s.shutErr
}

// DefaultShutdownTimeout bounds Shutdown when its context has no deadline.
const DefaultShutdownTimeout = 15 * time.Second

func (s *Server) shutdown(ctx context.Context) error {
	grace := DefaultShutdownTimeout
	if d, ok := ctx.Deadline(); ok {
		grace = time.Until(d)
	} else {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, grace)
		defer cancel()
	}
	drain, cancelDrain := context.WithTimeout(ctx, grace*3/4)
	defer cancelDrain()
	s.api.Close()
	s.a2a.Close()
	s.stop()
	var errs []error
	if err := s.http.Shutdown(drain); err != nil {
		errs = append(errs, fmt.Errorf("draining requests: %w", err))
		s.http.Close()
	}
	if err := <-s.done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		errs = append(errs, err)
	}
	if !waitCtx(drain, s.tasks.Wait) {
		errs = append(errs, errors.New("the outbound dispatcher or a receiver did not stop in time"))
	}
	var cerr error
	if !waitCtx(ctx, func() { cerr = s.core.Close() }) {
		errs = append(errs, errors.New("the ledger did not close in time"))
	} else if cerr != nil {
		errs = append(errs, fmt.Errorf("closing the ledger: %w", cerr))
	}
	return errors.Join(errs...)
}

// waitCtx runs f and reports whether it returned before ctx ended; f keeps
// running in the background if not.
func waitCtx(ctx context.Context, f func()) bool {
	done := make(chan struct{})
	go func() { f(); close(done) }()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}

// keySigner signs for the agents whose keys the relay holds.
type keySigner map[string]*signing.PrivateKey

// Sign implements gateway.Signer.
func (s keySigner) Sign(ctx context.Context, principal string, text []byte) ([]byte, bool, error) {
	for id, k := range s {
		if attention.SameActor(id, principal) {
			out, err := signing.Sign(text, k, &signing.SignOptions{Announce: true})
			return out, err == nil, err
		}
	}
	return nil, false, nil
}

// openProjection opens the projection file at path. One SQLite cannot read
// (projection.ErrDamaged: a crash, a disk error, garbage copied over it)
// is a cache of the ledger, which deleting is always safe for
// (docs/scaling.md "Projections"): it is removed, with a warning, and
// started again empty, to be rebuilt from the ledger.
func openProjection(ctx context.Context, path string, log *slog.Logger) (*projection.DB, error) {
	proj, err := projection.Open(ctx, path)
	if !errors.Is(err, projection.ErrDamaged) {
		return proj, err
	}
	log.Warn("projections file damaged: removing it to rebuild it from the ledger", "file", path, "err", err)
	if rerr := projection.Remove(path); rerr != nil {
		return nil, errors.Join(err, rerr)
	}
	return projection.Open(ctx, path)
}
