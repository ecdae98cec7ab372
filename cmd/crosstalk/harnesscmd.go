package main

import (
	"context"
	"errors"
	"io"
	"os"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/channel"
)

var cmdHarness = &command{
	name:    "harness",
	args:    "--agent NAME [--relay URL | --data DIR] [--group G]",
	summary: "push an agent's C2A deliveries to a harness over stdio (JSON-RPC)",
	run:     runHarness,
}

func runHarness(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, `
Harness runs the C2A delivery channel for one agent over standard input and
output: newline-delimited JSON-RPC 2.0, the same protocol the relay serves over
WebSocket at /v1/agents/NAME/channel. An agent harness starts it as a child
process, sends initialize, and receives chat/deliver requests carrying C2A
event envelopes; its responses acknowledge them. Unacknowledged events are
redelivered with backoff (at most --max-attempts times, then the channel
closes), and a restarted harness resumes after the last acknowledged event.
See docs/agents.md for the protocol with examples.`)
	bf := addBackendFlags(fs)
	agent := fs.String("agent", "", "agent `name` to deliver for (required)")
	group := fs.String("group", "", "only this `group` (default: every group)")
	attempts := fs.Int("max-attempts", channel.DefaultMaxAttempts, "deliveries of one event before giving up")
	ackTimeout := fs.Duration("ack-timeout", channel.DefaultAckTimeout, "wait for an acknowledgement before the first redelivery")
	heartbeat := fs.Duration("heartbeat", channel.DefaultHeartbeat, "ping interval")
	window := fs.Int("window", channel.DefaultWindow, "unacknowledged deliveries in flight")
	if pos, err := parseFlags(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return usagef("harness: unexpected argument %q", pos[0])
	}
	if *agent == "" {
		return usagef("harness: --agent is required")
	}
	if *attempts < 1 || *ackTimeout <= 0 || *heartbeat < time.Second || *window < 1 {
		return usagef("harness: --max-attempts and --window must be ≥ 1, --ack-timeout > 0, --heartbeat ≥ 1s")
	}
	log := newLogger(e, *bf.logLevel)
	backend, release, err := bf.open(ctx, log, "channel")
	if err != nil {
		return err
	}
	defer release()
	var closer io.Closer
	if c, ok := e.stdin.(io.Closer); ok && e.stdin != os.Stdin {
		closer = c
	}
	conn := channel.NewStreamConn(e.stdin, e.stdout, closer, channel.DefaultMaxMessage)
	err = channel.Serve(ctx, conn, channel.Options{
		Agent: *agent, Backend: backend, Group: *group, Logger: log.With("component", "channel"),
		MaxAttempts: *attempts, AckTimeout: *ackTimeout, Heartbeat: *heartbeat, Window: *window, Version: version(),
	})
	if errors.Is(err, channel.ErrUnacknowledged) {
		return withHint(err, "the harness must answer every chat/deliver request; restart it to resume")
	}
	return err
}
