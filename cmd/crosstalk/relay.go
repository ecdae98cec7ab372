package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"syscall"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/server"
	"github.com/crosstalk-go/crosstalk/internal/procs"
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
	dataDir := fs.String("data", "", "data `dir` (ledger, minted tokens, inbox and outbox folders); overrides data_dir")
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
	defer procs.ForRelay()()
	srv, err := startRelay(ctx, cfg, log)
	if errors.Is(err, syscall.EADDRINUSE) {
		return withHint(err, fmt.Sprintf("another program (a relay already running?) listens on %s: stop it, or give this relay another address with --listen ADDR or listen in the config", cfg.Listen))
	}
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

// runningRelay is a relay started by `crosstalk relay`: the server and
// what the command needs to stop it.
type runningRelay struct {
	*server.Server
	url   string
	store ledger.Store
	log   *slog.Logger
	// grace bounds shutdown (shutdown_timeout).
	grace time.Duration
}

// startRelay starts the relay cfg describes (server.Open). It returns once
// the listener is up.
func startRelay(ctx context.Context, cfg Config, log *slog.Logger) (*runningRelay, error) {
	opts, err := cfg.serverOptions(log)
	if err != nil {
		return nil, err
	}
	srv, err := server.Open(ctx, opts)
	if err != nil {
		return nil, err
	}
	r := &runningRelay{Server: srv, url: srv.URL(), store: srv.Store(), log: log, grace: time.Duration(cfg.ShutdownTimeout)}
	log.Info("web inbox: open " + r.url + "/ in a browser")
	if r.url == "http://"+DefaultListen {
		log.Info("try: crosstalk send FILE; crosstalk log; crosstalk inbox --agent NAME", "relay", r.url)
	} else {
		// The commands reach 127.0.0.1:7777 unless told otherwise.
		log.Info("try: export CROSSTALK_RELAY="+r.url+"; then crosstalk send FILE; crosstalk log; crosstalk inbox --agent NAME", "relay", r.url)
	}
	return r, nil
}

// shutdown stops the relay within its grace period (server.Shutdown,
// docs/operations.md) and logs how it went. What was acknowledged is
// durable either way (docs/design.md §5.1).
func (r *runningRelay) shutdown() error {
	start := time.Now()
	grace := r.grace
	if grace <= 0 {
		grace = defaultShutdownTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := r.Shutdown(ctx); err != nil {
		r.log.Error("shutdown incomplete", "took", time.Since(start).Round(time.Millisecond), "err", err)
		return err
	}
	r.log.Info("stopped: requests drained, ledger closed", "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// serverOptions turns the configuration into the server's options: the
// files it names are read here (tokens, signing keys, the mail password).
func (c *Config) serverOptions(log *slog.Logger) (*server.Options, error) {
	tokens, err := c.tokens()
	if err != nil {
		return nil, err
	}
	keys, err := c.signingKeys()
	if err != nil {
		return nil, err
	}
	proxies, err := c.trustedProxies()
	if err != nil {
		return nil, err
	}
	agents := make([]gateway.Agent, len(c.Agents))
	for i, a := range c.Agents {
		agents[i] = a.agent()
	}
	o := &server.Options{
		Listen: c.Listen, DataDir: c.DataDir,
		Ledger: c.Ledger, LedgerStream: c.LedgerStream, LedgerReplicas: c.LedgerReplicas,
		Name: c.Name, Hosts: c.Hosts, TrustedProxies: proxies, TrustFile: c.trustFile(), RequireSignatures: c.RequireSignatures,
		RateLimit: c.RateLimit, RateBurst: c.RateBurst, ClaimTTL: time.Duration(c.ClaimTTL),
		StaleAfter: time.Duration(c.Liveness.StaleAfter),
		MaxBody:    c.MaxBody, MaxEnvelopes: c.MaxEnvelopes, StreamLimit: c.StreamLimit, MaxStreams: c.MaxStreams,
		Timeouts: api.Timeouts{
			ReadHeader: time.Duration(c.ReadHeaderTimeout), Read: time.Duration(c.ReadTimeout), Idle: time.Duration(c.IdleTimeout),
		},
		Groups: c.Groups, Tokens: tokens, Admins: c.Admins, DNSServer: c.DNSServer, SecureCookies: c.SecureCookies,
		Agents: agents, SigningKeys: keys, Returns: c.Obligations.returns(),
		// The state file is the one `crosstalk clip` uses, so the relay
		// never ingests what clip copy (or itself) put on the clipboard.
		Clipboard: server.ClipboardOptions{Watch: c.Clipboard.Watch, Fence: c.Clipboard.Fence, StateFile: defaultClipState()},
		Logger:    log,
	}
	if !c.Folder.Disabled {
		o.Folder = &server.FolderOptions{Inbox: c.Folder.Inbox, Outbox: c.Folder.Outbox}
	}
	if o.Mail, err = c.mailOptions(); err != nil {
		return nil, err
	}
	return o, nil
}
