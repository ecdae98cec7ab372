package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/a2a"
	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/jetstream"
	"github.com/crosstalk-go/crosstalk/gateway/metrics"
	"github.com/crosstalk-go/crosstalk/gateway/web"
	"github.com/crosstalk-go/crosstalk/signing"
)

var cmdRelay = &command{
	name:    "relay",
	args:    "[--config FILE] [--data DIR] [--listen ADDR] [--ledger sqlite|nats://…]",
	summary: "run the relay: HTTP intake, durable ledger, C2A attention, API",
	run:     runRelay,
}

func runRelay(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, `
Relay runs the crosstalk relay. With no flags it keeps its SQLite ledger in the
user's data directory and listens on `+DefaultListen+` (loopback only).
Envelopes come in over POST /crosstalk/receive (crosstalk send); the ledger is
readable with crosstalk log, each agent's attention with crosstalk inbox.
See docs/configuration.md for the config file.`)
	cfgPath := fs.String("config", "", "TOML config `file` (see docs/configuration.md)")
	dataDir := fs.String("data", "", "data `dir` (ledger, trust store); overrides data_dir")
	listen := fs.String("listen", "", "listen `address`; overrides listen")
	logLevel := fs.String("log-level", "", "debug, info, warn or error; overrides log_level")
	ledgerURL := fs.String("ledger", "", "ledger: sqlite, or nats://host:port[,nats://…] for a shared JetStream ledger; overrides ledger")
	checkOnly := fs.Bool("check-config", false, "check the configuration and exit: 0 when the relay would start with it; opens no ledger, listener or connection")
	if pos, err := parseFlags(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return usagef("relay: unexpected argument %q", pos[0])
	}
	cfg, err := LoadConfig(*cfgPath)
	if err != nil {
		return err
	}
	if *dataDir != "" {
		cfg.DataDir = *dataDir
	}
	if *listen != "" {
		cfg.Listen = *listen
	}
	if *logLevel != "" {
		cfg.LogLevel = *logLevel
	}
	if *ledgerURL != "" {
		cfg.Ledger = *ledgerURL
	}
	if err := cfg.Validate(); err != nil {
		return withHint(err, "fix the config file or flags; docs/configuration.md lists every field")
	}
	if *checkOnly {
		return checkConfig(e, cfg, *cfgPath)
	}
	log := newLogger(e, cfg.LogLevel)
	srv, err := startRelay(ctx, cfg, log)
	if err != nil {
		return err
	}
	<-ctx.Done()
	log.Info("shutting down", "deadline", time.Duration(cfg.ShutdownTimeout))
	return srv.shutdown()
}

func newLogger(e *env, level string) *slog.Logger {
	var l slog.Level
	l.UnmarshalText([]byte(level))
	return slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: l}))
}

// runningRelay is a started relay: its listener, HTTP server and store.
type runningRelay struct {
	url   string
	http  *http.Server
	api   *api.Server
	a2a   *a2a.Bridge
	store ledger.Store
	log   *slog.Logger
	done  chan error
	// grace bounds shutdown (shutdown_timeout).
	grace time.Duration
	// stop ends the background tasks (outbound dispatcher, receivers);
	// tasks is done when they have returned.
	stop  context.CancelFunc
	tasks sync.WaitGroup
}

// startRelay opens the ledger, builds the relay and API, and starts
// serving. It returns once the listener is up.
func startRelay(ctx context.Context, cfg Config, log *slog.Logger) (*runningRelay, error) {
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	store, where, err := openRelayLedger(ctx, cfg)
	if err != nil {
		return nil, err
	}
	book, _ := cfg.book() // validated
	tokens, _ := cfg.tokens()
	ts, err := buildTransports(cfg, log)
	if err != nil {
		store.Close()
		return nil, err
	}
	verifier, signer, err := newTrust(cfg, log)
	if err != nil {
		store.Close()
		return nil, err
	}
	mx := metrics.New(&metrics.Options{Logger: log.With("component", "metrics")})
	relay := gateway.New(mx.Store(store), &gateway.Options{
		Logger: log.With("component", "relay"), Book: book, Verifier: verifier,
		Groups: cfg.Groups, RequireSignature: cfg.RequireSignatures, Name: cfg.Name, Admins: cfg.Admins,
		ClaimTTL: time.Duration(cfg.ClaimTTL), MaxIntake: cfg.MaxBody, MaxEnvelopes: cfg.MaxEnvelopes,
		Observer: mx,
	})
	mx.WatchRelay(relay)
	if js, ok := store.(*jetstream.Store); ok {
		mx.WatchJetStream(js.Conn(), cfg.LedgerStream)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("listen: %w", err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	hosts := []string{"localhost:" + port, "127.0.0.1:" + port, "[::1]:" + port}
	for _, h := range cfg.Hosts {
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(h, port)
		}
		hosts = append(hosts, h)
	}
	minted := cfg.mintedTokens() // crosstalk token new, and the trust page's button
	a := api.New(relay, &api.Options{
		Logger: log.With("component", "api"), Tokens: tokens, Hosts: hosts,
		Rate: cfg.RateLimit, Burst: cfg.RateBurst, Signer: signer,
		StreamLimit: cfg.StreamLimit, MaxStreams: cfg.MaxStreams,
		Minted: minted,
	})
	a.MountAgents(nil) // the JSON-RPC channel, agent list, cursors, heartbeats (docs/agents.md)
	a.Handle("GET /metrics", mx.Handler())
	if s, ok := ts.senders["a2a"].(*a2a.Sender); ok {
		s.Relay = relay // record what A2A agents answer at once
	}
	bridge := a2a.New(relay, &a2a.Options{Logger: log.With("component", "a2a"), Signer: signer, Bearer: len(tokens) > 0})
	a.Handle(a2a.Prefix, bridge) // A2A cards and endpoints of the agents with a2a = true (docs/agents.md)
	site, err := web.New(relay, a, &web.Options{
		Logger: log.With("component", "web"), Trust: signing.NewTrustStore(cfg.trustFile()),
		Admins: cfg.Admins, Secure: cfg.SecureCookies, Tokens: minted,
	})
	if err != nil {
		ln.Close()
		store.Close()
		return nil, err
	}
	hs := api.NewHTTPServer(mx.Middleware(site), api.Timeouts{
		ReadHeader: time.Duration(cfg.ReadHeaderTimeout), Read: time.Duration(cfg.ReadTimeout), Idle: time.Duration(cfg.IdleTimeout),
	}, slog.NewLogLogger(log.Handler(), slog.LevelWarn))
	r := &runningRelay{url: "http://" + net.JoinHostPort("127.0.0.1", port), http: hs, api: a, a2a: bridge, store: store, log: log, done: make(chan error, 1), grace: time.Duration(cfg.ShutdownTimeout)}
	if host, _, _ := net.SplitHostPort(cfg.Listen); !isLoopback(host) {
		r.url = "http://" + ln.Addr().String()
	}
	go func() { r.done <- hs.Serve(ln) }()
	bg, stop := context.WithCancel(context.WithoutCancel(ctx))
	r.stop = stop
	r.tasks.Add(1)
	go func() {
		defer r.tasks.Done()
		if err := relay.RunOutbound(bg, &gateway.OutboundOptions{Senders: ts.senders}); err != nil {
			log.Error("outbound dispatcher stopped", "err", err)
		}
	}()
	for name, recv := range ts.receivers {
		r.tasks.Add(1)
		go func() {
			defer r.tasks.Done()
			log.Info("receiving", "transport", name)
			if err := recv.Receive(bg, relay.Handler()); err != nil {
				log.Error("receiver stopped", "transport", name, "err", err)
			}
		}()
	}
	log.Info("relay listening", "url", r.url, "ledger", where, "trust", cfg.trustFile(), "tokens", len(tokens), "agents", len(cfg.Agents))
	log.Info("web inbox: open " + r.url + "/ in a browser")
	log.Info("try: crosstalk send FILE; crosstalk log; crosstalk inbox --agent NAME", "relay", r.url)
	return r, nil
}

// shutdown stops the relay within its grace period (docs/operations.md):
// it ends the open streams, stops accepting connections and waits for the
// requests in flight — and so their appends — to finish while the
// background tasks (dispatcher, receivers) stop, then closes the ledger,
// which commits the appends already queued. Draining may take three
// quarters of the grace period; past that the remaining connections are
// closed, and the ledger is closed all the same. It returns an error
// naming what did not finish in time; what was acknowledged is durable
// either way (DESIGN §5.1).
func (r *runningRelay) shutdown() error {
	start := time.Now()
	grace := r.grace
	if grace <= 0 {
		grace = defaultShutdownTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	drain, cancelDrain := context.WithTimeout(ctx, grace*3/4)
	defer cancelDrain()
	r.api.Close()
	r.a2a.Close()
	r.stop()
	var errs []error
	if err := r.http.Shutdown(drain); err != nil {
		errs = append(errs, fmt.Errorf("draining requests: %w", err))
		r.http.Close()
	}
	if err := <-r.done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		errs = append(errs, err)
	}
	if !waitCtx(drain, r.tasks.Wait) {
		errs = append(errs, errors.New("the outbound dispatcher or a receiver did not stop in time"))
	}
	var cerr error
	if !waitCtx(ctx, func() { cerr = r.store.Close() }) {
		errs = append(errs, errors.New("the ledger did not close in time"))
	} else if cerr != nil {
		errs = append(errs, fmt.Errorf("closing the ledger: %w", cerr))
	}
	if err := errors.Join(errs...); err != nil {
		r.log.Error("shutdown incomplete", "took", time.Since(start).Round(time.Millisecond), "err", err)
		return err
	}
	r.log.Info("stopped: requests drained, ledger closed", "took", time.Since(start).Round(time.Millisecond))
	return nil
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

// openRelayLedger opens the configured ledger: SQLite in the data dir, or a
// JetStream ledger shared by several relays (docs/scaling.md). It returns
// the store and where it is, for the log.
func openRelayLedger(ctx context.Context, cfg Config) (ledger.Store, string, error) {
	spec := cfg.Ledger
	if spec == "sqlite" {
		spec = filepath.Join(cfg.DataDir, "ledger.db")
	}
	st, err := openLedger(ctx, spec, cfg.LedgerStream, cfg.LedgerReplicas, true)
	return st, spec, err
}
