package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/client"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/transports/clipboard"
)

var cmdClip = &command{
	name:    "clip",
	args:    "watch [--json] [--relay URL] | copy --to NAME [--fence] [--relay URL]",
	summary: "watch the clipboard for envelopes, or copy the next one for an agent to it",
	run:     runClip,
}

var cmdClipWatch = &command{
	name:    "clip watch",
	args:    "[--json] [--relay URL] [flags]",
	summary: "watch the clipboard for envelopes",
}

var cmdClipCopy = &command{
	name:    "clip copy",
	args:    "--to NAME [--fence] [--relay URL] [flags]",
	summary: "copy the next pending envelope for NAME to the clipboard",
}

const clipDoc = `
Clip connects the system clipboard (docs/transports.md, "Clipboard"):

  crosstalk clip watch [--json] [--relay URL]
      print (or forward to a relay) every envelope copied to the clipboard
  crosstalk clip copy --to NAME [--fence] [--relay URL]
      put the next envelope NAME has to answer on the clipboard, to paste
      into NAME's chat

Run ` + "`crosstalk clip watch --help`" + ` or ` + "`crosstalk clip copy --help`" + ` for their flags.
On Linux the clipboard needs xclip or xsel and an X11 session (DISPLAY), or
wl-clipboard under Wayland.`

func runClip(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return usagef("clip: want a subcommand: watch or copy (see `crosstalk clip --help`)")
	}
	switch args[0] {
	case "watch":
		return runClipWatch(ctx, e.sub(cmdClipWatch), args[1:])
	case "copy":
		return runClipCopy(ctx, e.sub(cmdClipCopy), args[1:])
	case "-h", "-help", "--help", "help":
		fmt.Fprintf(e.stdout, "usage: crosstalk clip %s\n%s\n", e.cmd.args, clipDoc)
		return nil
	}
	return usagef("clip: unknown subcommand %q: want watch or copy", args[0])
}

// defaultClipState is the state file `clip watch` and `clip copy` share,
// so that watch never ingests what copy placed and a restarted watch does
// not ingest the same clipboard again.
func defaultClipState() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "crosstalk", "clipboard.state")
}

func runClipWatch(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, `
Clip watch reads the clipboard every --interval and takes every new text that
holds an envelope header — once: texts seen before and texts that crosstalk
placed there itself (clip copy) are skipped, remembered in the --state file.
Without --relay it prints the envelopes (a summary each, or JSON Lines of the
`+"`crosstalk parse --json`"+` contract with --json). With --relay it forwards the text
to the relay's POST /crosstalk/receive and prints the receipts; when the relay
cannot be reached the text is tried again while it stays on the clipboard.

A clipboard larger than 8 MiB is not read (a notice on standard error). Clip
watch runs until interrupted.`)
	asJSON := fs.Bool("json", false, "print JSON Lines")
	relay := fs.String("relay", "", "forward to the relay at `URL` (e.g. http://"+DefaultListen+") instead of printing")
	token := fs.String("token", "", "bearer `token` for --relay (default $CROSSTALK_TOKEN)")
	interval := fs.Duration("interval", clipboard.DefaultInterval, "how often the clipboard is read")
	state := fs.String("state", defaultClipState(), "`file` remembering texts seen and copied (\"\" keeps them in memory only)")
	level := fs.String("log-level", "warn", "log `level` on standard error: debug, info, warn, error")
	if pos, err := parseFlags(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return usagef("clip watch: unexpected argument %q", pos[0])
	}
	out := newEnvelopePrinter(e.stdout, *asJSON)
	h := out.handle
	if *relay != "" {
		h = newForwarder(*relay, tokenOrEnv(*token), out).handle
	}
	c := clipboard.New(&clipboard.Options{Logger: newLogger(e, *level), Interval: *interval, StateFile: *state})
	return c.Receive(ctx, h)
}

func runClipCopy(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, `
Clip copy asks the relay for NAME's deliveries, takes the oldest one NAME must
or may respond to that NAME has not read yet, and puts that envelope on the
clipboard exactly as the relay received it (a signed envelope stays signed),
fenced in `+"```"+` with --fence. It then marks the event read for NAME, so the next
clip copy moves on to the next one.

Exit status: 0 when an envelope was copied, 1 when nothing is pending or the
relay or clipboard failed.`)
	rf := addRelayFlags(fs)
	to := fs.String("to", "", "the agent `NAME` whose next envelope to copy (required)")
	fence := fs.Bool("fence", false, "wrap the envelope in a triple-backtick fence for chat UIs that collapse newlines")
	state := fs.String("state", defaultClipState(), "`file` shared with clip watch, so it does not ingest the copy")
	if pos, err := parseFlags(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return usagef("clip copy: unexpected argument %q", pos[0])
	}
	if *to == "" {
		return usagef("clip copy: --to NAME is required")
	}
	c := clipboard.New(&clipboard.Options{Fence: *fence, StateFile: *state})
	// Fail early, before marking anything read, when there is no clipboard.
	if _, err := c.Tool(); err != nil {
		return err
	}
	next, agent, err := nextPending(ctx, rf, *to)
	if err != nil {
		return err
	}
	if next == nil {
		fmt.Fprintf(e.stderr, "crosstalk: nothing pending for %s\n", agent)
		return failedError{}
	}
	raw, err := rawEnvelope(ctx, rf, *next)
	if err != nil {
		return err
	}
	if err := c.Send(ctx, *to, next.MessageID, []byte(raw)); err != nil {
		return err
	}
	path := fmt.Sprintf("/v1/groups/%s/events/%s/read", client.PathSegment(next.Group), url.PathEscape(next.EventID))
	var res gateway.ActionResult
	if err := rf.do(ctx, "POST", path, *to, nil, &res); err != nil {
		return withHint(fmt.Errorf("copied, but marking event %s read failed: %w", next.EventID, err),
			"the next clip copy will copy the same envelope again")
	}
	from, rcpt := next.From, *to
	if env, err := envelope.NewReader(strings.NewReader(raw)).Next(); err == nil {
		from, rcpt = env.From, env.To
	}
	fmt.Fprintln(e.stdout, visible(fmt.Sprintf("copied %s → %s %s %s (group %s, seq %d, %s) to the clipboard",
		from, rcpt, next.Intent, orNone(next.MessageID), next.Group, next.Seq, next.Policy)))
	return nil
}

// nextPending returns the oldest must_respond or may_respond delivery of a
// message to agent past agent's read cursor in its group (nil when there is
// none), and the agent's actor id. A cursor is the last event the agent
// read, inclusive (CCCS §6.3); clip copy moves it with each copy.
func nextPending(ctx context.Context, rf relayFlags, agent string) (*gateway.Delivery, string, error) {
	var cur struct {
		Agent   string           `json:"agent"`
		Cursors map[string]int64 `json:"cursors"`
	}
	if err := rf.do(ctx, "GET", "/v1/agents/"+client.PathSegment(agent)+"/cursors", agent, nil, &cur); err != nil {
		return nil, agent, err
	}
	if cur.Agent == "" {
		cur.Agent = agent
	}
	var gs struct {
		Groups []ledger.Group `json:"groups"`
	}
	if err := rf.do(ctx, "GET", "/v1/groups", "", nil, &gs); err != nil {
		return nil, cur.Agent, err
	}
	var best *gateway.Delivery
	for _, g := range gs.Groups {
		d, err := firstPending(ctx, rf, agent, g.ID, cur.Cursors[g.ID])
		if err != nil {
			return nil, cur.Agent, err
		}
		if d != nil && (best == nil || older(*d, *best)) {
			best = d
		}
	}
	return best, cur.Agent, nil
}

// firstPending returns agent's first must_respond or may_respond message
// delivery in group with seq > since, paging through the deliveries.
func firstPending(ctx context.Context, rf relayFlags, agent, group string, since int64) (*gateway.Delivery, error) {
	for {
		q := url.Values{"group": {group}, "since_seq": {fmt.Sprint(since)}, "limit": {"1000"}}
		var res struct {
			Deliveries []gateway.Delivery `json:"deliveries"`
		}
		if err := rf.do(ctx, "GET", "/v1/agents/"+client.PathSegment(agent)+"/deliveries?"+q.Encode(), agent, nil, &res); err != nil {
			return nil, err
		}
		for i, d := range res.Deliveries {
			if d.Kind == gateway.KindMessage && (d.Policy == attention.MustRespond || d.Policy == attention.MayRespond) {
				return &res.Deliveries[i], nil
			}
		}
		if len(res.Deliveries) == 0 || res.Deliveries[len(res.Deliveries)-1].Seq <= since {
			return nil, nil
		}
		since = res.Deliveries[len(res.Deliveries)-1].Seq
	}
}

// older orders deliveries of different groups by time, then group and seq.
func older(a, b gateway.Delivery) bool {
	ta, ea := time.Parse(time.RFC3339Nano, a.TS)
	tb, eb := time.Parse(time.RFC3339Nano, b.TS)
	if ea == nil && eb == nil && !ta.Equal(tb) {
		return ta.Before(tb)
	}
	if a.Group != b.Group {
		return a.Group < b.Group
	}
	return a.Seq < b.Seq
}

// rawEnvelope returns the envelope text of a delivery's event exactly as
// the relay received it (data.x_crosstalk.raw).
func rawEnvelope(ctx context.Context, rf relayFlags, d gateway.Delivery) (string, error) {
	q := url.Values{"since_seq": {fmt.Sprint(d.Seq - 1)}, "limit": {"1"}}
	var page struct {
		Events []ledger.Event `json:"events"`
	}
	if err := rf.do(ctx, "GET", "/v1/groups/"+client.PathSegment(d.Group)+"/events?"+q.Encode(), "", nil, &page); err != nil {
		return "", err
	}
	if len(page.Events) == 0 || page.Events[0].ID != d.EventID {
		return "", fmt.Errorf("clip copy: event %s (group %s, seq %d) not found on the relay", d.EventID, d.Group, d.Seq)
	}
	data, err := gateway.ParseData(page.Events[0])
	if err != nil {
		return "", fmt.Errorf("clip copy: event %s: %w", d.EventID, err)
	}
	if data.X == nil || data.X.Raw == "" {
		return "", errors.New("clip copy: event " + d.EventID + " holds no envelope text")
	}
	return data.X.Raw, nil
}
