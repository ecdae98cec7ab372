package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/crosstalk-go/crosstalk/gateway/c2a"
	"github.com/crosstalk-go/crosstalk/gateway/mcpserver"
	"github.com/crosstalk-go/crosstalk/gateway/reserve"
	"github.com/crosstalk-go/crosstalk/gateway/server"
	"github.com/crosstalk-go/crosstalk/signing"
)

var cmdMCP = &command{
	name:    "mcp",
	args:    "--agent NAME [--relay URL | --data DIR] [--key FILE]",
	summary: "serve an agent's C2A chat tools to an MCP host over stdio",
	run:     runMCP,
}

// backendFlags choose the relay an agent command talks to: a running
// relay over HTTP (--relay), or the ledger directly (--data).
type backendFlags struct {
	relay    relayFlags
	data     *string
	config   *string
	logLevel *string
	fs       *flag.FlagSet
}

func addBackendFlags(fs *flag.FlagSet) backendFlags {
	return backendFlags{
		relay:    addRelayFlags(fs),
		data:     fs.String("data", "", "open the relay's ledger in data `dir` (or the config's ledger) instead of talking to a relay"),
		config:   fs.String("config", "", "relay config `file` for --data (ledger, address book, groups, trust, require_signatures)"),
		logLevel: fs.String("log-level", "warn", "debug, info, warn or error (logs go to standard error)"),
		fs:       fs,
	}
}

// open returns the backend and a function that releases it.
func (bf backendFlags) open(ctx context.Context, log *slog.Logger, transport string) (c2a.Backend, func(), error) {
	relaySet := false
	bf.fs.Visit(func(f *flag.Flag) { relaySet = relaySet || f.Name == "relay" })
	if *bf.data == "" {
		return &c2a.Remote{URL: bf.relay.base(), Token: bf.relay.bearer(), Logger: log}, func() {}, nil
	}
	if relaySet {
		return nil, nil, usagef("give --relay or --data, not both")
	}
	cfg, err := LoadConfig(*bf.config)
	if err != nil {
		return nil, nil, err
	}
	cfg.DataDir = *bf.data
	if err := cfg.Validate(); err != nil {
		return nil, nil, withHint(err, "fix the config file; docs/configuration.md lists every field")
	}
	opts, err := cfg.serverOptions(log)
	if err != nil {
		return nil, nil, err
	}
	// The relay's own ledger, verifier and require_signatures: an agent
	// served here sees and sends what it would through the relay.
	core, err := server.OpenCore(ctx, opts)
	if err != nil {
		return nil, nil, err
	}
	scopes, err := reserve.NewService(ctx, core.Relay.Store(), reserve.Options{Policy: core.Relay.ReservePolicy()})
	if err != nil {
		core.Close()
		return nil, nil, fmt.Errorf("reservations: %w", err)
	}
	return &c2a.Local{Relay: core.Relay, Transport: transport, Scopes: scopes}, func() { core.Close() }, nil
}

func runMCP(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, `
MCP serves one agent's C2A chat tools over stdio to an MCP host (Claude Desktop,
Claude Code, any MCP client): chat.list_events, chat.read_thread,
chat.send_message, chat.react, chat.claim, chat.defer, chat.resolve,
chat.discharge, chat.owe, chat.waiting, chat.handoff, chat.blocked,
chat.forward, scope.reserve, scope.release, scope.reservations,
agent.heartbeat and envelope.parse, envelope.compose, envelope.verify. With --relay (default
$CROSSTALK_RELAY or http://`+DefaultListen+`) it uses a running relay's HTTP API;
with --data it opens the ledger in DIR itself. With --key it signs what the agent
sends. Standard output carries the MCP protocol; logs go to standard error.
See docs/agents.md for the host configuration and every tool.`)
	bf := addBackendFlags(fs)
	agent := fs.String("agent", "", "agent `name` the tools act for (required)")
	keyFile := fs.String("key", "", "private key `file` to sign sent envelopes with")
	pkid := fs.String("pkid", "", "key `id` of --key when the file names none")
	trust := fs.String("trust", "", "trust store `file` envelope.verify reads (never written)")
	if pos, err := parseFlags(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return usagef("mcp: unexpected argument %q", pos[0])
	}
	if *agent == "" {
		return usagef("mcp: --agent is required")
	}
	log := newLogger(e, *bf.logLevel)
	backend, release, err := bf.open(ctx, log, "mcp")
	if err != nil {
		return err
	}
	defer release()
	opts := mcpserver.Options{Agent: *agent, Backend: backend, Logger: log.With("component", "mcp"), Version: version()}
	if *keyFile != "" {
		key, err := signing.LoadPrivateKey(*keyFile, *pkid)
		if err != nil {
			return withHint(err, "create a key with `crosstalk keygen`")
		}
		opts.Signer = func(text []byte) ([]byte, error) {
			return signing.Sign(text, key, &signing.SignOptions{Announce: true})
		}
	}
	if *trust != "" {
		opts.Trust = signing.NewTrustStore(*trust)
	}
	// A line that is not one JSON-RPC message gets a JSON-RPC error, and the
	// session goes on (the SDK's stdio transport ends it).
	err = mcpserver.Run(ctx, opts, &mcpserver.StreamTransport{Reader: e.stdin, Writer: e.stdout})
	if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return nil
	}
	return err
}

// version is the binary's version for serverInfo.
func version() string { return "0.1.0" }
