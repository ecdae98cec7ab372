package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway/client"
	"github.com/crosstalk-go/crosstalk/transports"
	"github.com/crosstalk-go/crosstalk/transports/folder"
)

var cmdWatch = &command{
	name:    "watch",
	args:    "[--json] [--relay URL] [flags] DIR",
	summary: "watch a folder for envelope files; print them or forward them to a relay",
	run:     runWatch,
}

func runWatch(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, `
Watch runs the folder transport on DIR alone (docs/transports.md, "Folder").
It picks up *.crosstalk and *.aict files once they are complete — the last
line is [[END]] and the file has not changed for --settle — and then moves
each to DIR/processed/, or to DIR/failed/ with NAME.error beside it when no
envelope in it was accepted. Symbolic links, hard links, oversized files and
unsafe names are refused into failed/ unread; a file that stays incomplete
for --timeout is moved to failed/ too.

Without --relay it prints every envelope of each file as the file completes:
a summary, or with --json one JSON object per envelope (JSON Lines, the
contract of `+"`crosstalk parse --json`"+`). With --relay it forwards each file's
text to the relay's POST /crosstalk/receive and prints the receipts (as
JSON envelopes with --json); a file is moved only once the relay has recorded
it, and kept for another try when the relay cannot be reached.

Watch runs until interrupted.`)
	asJSON := fs.Bool("json", false, "print JSON Lines")
	relay := fs.String("relay", "", "forward the files to the relay at `URL` (e.g. http://"+DefaultListen+") instead of printing")
	token := fs.String("token", "", "bearer `token` for --relay (default $CROSSTALK_TOKEN)")
	settle := fs.Duration("settle", folder.DefaultSettle, "how long a complete file must stay unchanged")
	rescan := fs.Duration("rescan", folder.DefaultRescan, "interval of the full rescan")
	timeout := fs.Duration("timeout", folder.DefaultTimeout, "give up on a file that stays incomplete this long")
	level := fs.String("log-level", "warn", "log `level` on standard error: debug, info, warn, error")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("watch: want exactly one DIR (see `crosstalk watch --help`)")
	}
	dir := pos[0]
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		if err == nil {
			return fmt.Errorf("watch: %s: not a directory", dir)
		}
		if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("watch: %s: %w", dir, err)
		}
		return withHint(fmt.Errorf("watch: %s: %w", dir, err), "create it first, e.g. `mkdir -p "+dir+"`")
	}
	log := newLogger(e, *level)
	out := newEnvelopePrinter(e.stdout, *asJSON)
	h := out.handle
	if *relay != "" {
		h = newForwarder(*relay, tokenOrEnv(*token), out).handle
	}
	f := folder.New(dir, &folder.Options{Logger: log, Settle: *settle, Rescan: *rescan, Timeout: *timeout})
	return f.Receive(ctx, h)
}

// envelopePrinter prints the envelopes of inbound texts the way `parse`
// does: a summary each, or JSON Lines (docs/design.md §3.4) with {"error":…} in
// place of a malformed envelope. It is safe for concurrent use.
type envelopePrinter struct {
	mu     sync.Mutex
	w      io.Writer
	asJSON bool
	enc    *json.Encoder
}

func newEnvelopePrinter(w io.Writer, asJSON bool) *envelopePrinter {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return &envelopePrinter{w: w, asJSON: asJSON, enc: enc}
}

// handle is a transports.Handler that prints and records nothing: the
// receiver then decides from its own parse where the text goes.
func (p *envelopePrinter) handle(ctx context.Context, in transports.Inbound) ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	name := displayName(in)
	err := readEnvelopes(input{name: name, r: bytes.NewReader(in.Data)}, false, func(env *envelope.Envelope, se *envelope.SyntaxError) error {
		if se != nil {
			if p.asJSON {
				var je jsonError
				je.Error.Code, je.Error.Line, je.Error.Message = se.Code, se.Line, se.Msg
				return p.enc.Encode(je)
			}
			_, err := fmt.Fprintln(p.w, visible(fmt.Sprintf("%s:%d: %s: %s", name, se.Line, se.Code, se.Msg)))
			return err
		}
		if p.asJSON {
			return p.enc.Encode(env)
		}
		return printSummary(p.w, name, env)
	})
	return nil, err
}

// displayName is how an inbound text is named in output: a file's path,
// or the medium.
func displayName(in transports.Inbound) string {
	if in.Transport == "folder" {
		if rel, err := filepath.Rel(".", in.Source); err == nil && !strings.HasPrefix(rel, "..") {
			return rel
		}
	}
	return in.Source
}

// forwarder is a transports.Handler that posts inbound text to a relay's
// POST /crosstalk/receive and prints the receipts.
type forwarder struct {
	relay *client.Client
	out   *envelopePrinter
}

func newForwarder(relay, token string, out *envelopePrinter) *forwarder {
	return &forwarder{
		// The receivers retry failed texts themselves; a couple of quick
		// retries here ride out a relay restart.
		relay: &client.Client{URL: strings.TrimRight(relay, "/"), Token: token, Retries: 2},
		out:   out,
	}
}

// handle forwards in. The text counts as handled (nil error, the receipts
// as the reply) when the relay recorded it: a 200, or a refusal whose
// receipts carry ledger event ids (a rejection is recorded too). Anything
// else — the relay unreachable, 5xx, a refused token — is an error, and
// the receiver keeps the text for another try.
func (f *forwarder) handle(ctx context.Context, in transports.Inbound) ([]byte, error) {
	resp, err := f.relay.Receive(ctx, in.Data)
	switch {
	case err == nil:
	case resp != nil && recorded(resp):
	case resp != nil:
		return nil, fmt.Errorf("relay refused %s without recording it: %w", displayName(in), err)
	default:
		return nil, fmt.Errorf("forwarding %s: %w", displayName(in), err)
	}
	f.out.receipts(displayName(in), resp.Envelopes)
	return resp.Body, nil
}

// recorded reports whether a relay's answer shows the intake recorded: a
// receipt or ERROR envelope naming a ledger event.
func recorded(resp *client.Receipts) bool {
	if resp == nil {
		return false
	}
	for _, env := range resp.Envelopes {
		if id, _ := env.MetaValue("receipt", "Event-ID"); id != "" {
			return true
		}
		if id, _ := env.MetaValue("error", "Event-ID"); id != "" {
			return true
		}
	}
	return false
}

// receipts prints a relay's receipts: one line each, or the receipt
// envelopes as JSON Lines.
func (p *envelopePrinter) receipts(name string, envs []*envelope.Envelope) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, env := range envs {
		if p.asJSON {
			p.enc.Encode(env)
			continue
		}
		if env.Intent == envelope.IntentError {
			fmt.Fprintln(p.w, visible(fmt.Sprintf("%s: rejected %s: %s", name, orNone(env.Parent), rejection(env))))
			continue
		}
		group, _ := env.MetaValue("receipt", "Group")
		seq, _ := env.MetaValue("receipt", "Seq")
		dup, _ := env.MetaValue("receipt", "Duplicate")
		// The event id is what crosstalk log shows and ack, claim and
		// forward take; the message id alone is neither.
		event, _ := env.MetaValue("receipt", "Event-ID")
		line := fmt.Sprintf("%s: recorded message %s as event %s (group %s, seq %s)", name, orNone(env.Parent), event, group, seq)
		if dup == "true" {
			line += " (duplicate)"
		}
		fmt.Fprintln(p.w, visible(line))
	}
}

// rejection is an ERROR envelope's error: its body when that is the code
// with the line ("E-FORMAT: line 3: …", what the relay writes), else Code:
// Reason, which has no line.
func rejection(env *envelope.Envelope) string {
	code, _ := env.MetaValue("error", "Code")
	reason, _ := env.MetaValue("error", "Reason")
	if body := strings.TrimSpace(env.Body); code != "" && strings.HasPrefix(body, code+": ") && !strings.Contains(body, "\n") {
		return body
	}
	return code + ": " + reason
}

func orNone(s string) string {
	if s == "" {
		return "(no message id)"
	}
	return s
}
