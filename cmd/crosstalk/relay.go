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
	"github.com/crosstalk-go/crosstalk/gateway/ledger/sqlite"
	"github.com/crosstalk-go/crosstalk/gateway/web"
	"github.com/crosstalk-go/crosstalk/signing"
)

var cmdRelay = &command{
	name:    "relay",
	args:    "[--config FILE] [--data DIR] [--listen ADDR] [--ledger sqlite|nats://…]",
	summary: "run the relay: HTTP intake, durable ledger, C2A attention, API",
}

func init() { cmdRelay.run = runRelay }

func runRelay(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, cmdRelay, `
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
	log := newLogger(e, cfg.LogLevel)
	srv, err := startRelay(ctx, cfg, log)
	if err != nil {
		return err
	}
	<-ctx.Done()
	log.Info("shutting down")
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
	relay := gateway.New(store, &gateway.Options{
		Logger: log.With("component", "relay"), Book: book, Verifier: verifier,
		Groups: cfg.Groups, RequireSignature: cfg.RequireSignatures, Name: cfg.Name,
		ClaimTTL: time.Duration(cfg.ClaimTTL),
	})
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
	a := api.New(relay, &api.Options{
		Logger: log.With("component", "api"), Tokens: tokens, Hosts: hosts,
		Rate: cfg.RateLimit, Burst: cfg.RateBurst, Signer: signer,
	})
	a.MountAgents(nil) // the JSON-RPC channel, agent list, cursors, heartbeats (docs/agents.md)
	bridge := a2a.New(relay, &a2a.Options{Logger: log.With("component", "a2a"), Signer: signer, Bearer: len(tokens) > 0})
	a.Handle(a2a.Prefix, bridge) // A2A cards and endpoints of the agents with a2a = true (docs/agents.md)
	site, err := web.New(relay, a, &web.Options{
		Logger: log.With("component", "web"), Trust: signing.NewTrustStore(cfg.trustFile()),
		Admins: cfg.Admins, Secure: cfg.SecureCookies,
	})
	if err != nil {
		ln.Close()
		store.Close()
		return nil, err
	}
	hs := &http.Server{
		Handler:           site,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	r := &runningRelay{url: "http://" + net.JoinHostPort("127.0.0.1", port), http: hs, api: a, a2a: bridge, store: store, log: log, done: make(chan error, 1)}
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

// shutdown stops accepting requests, waits for in-flight ones (and so
// their appends) to finish, then closes the ledger.
func (r *runningRelay) shutdown() error {
	r.api.Close()
	r.a2a.Close()
	r.stop()
	r.tasks.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err := r.http.Shutdown(ctx)
	if serr := <-r.done; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	if cerr := r.store.Close(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	return err
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

// sqliteStats returns the SQLite writer's counters (zero for other stores).
func (r *runningRelay) sqliteStats() sqlite.Stats {
	if st, ok := r.store.(*sqlite.Store); ok {
		return st.Stats()
	}
	return sqlite.Stats{}
}
