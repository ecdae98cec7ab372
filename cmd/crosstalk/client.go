package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/c2a"
	"github.com/crosstalk-go/crosstalk/gateway/client"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

var cmdSend = &command{
	name:    "send",
	args:    "[--relay URL] [--token T] [--retries N] [FILE...]",
	summary: "post envelopes to a relay and print the receipts",
	run:     runSend,
}

var cmdLog = &command{
	name:    "log",
	args:    "[--relay URL] [--group G] [--since N | --before N | --all] [--limit N] [--follow] [--json]",
	summary: "show the relay's ledger",
	run:     runLog,
}

var cmdInbox = &command{
	name:    "inbox",
	args:    "--agent A [--relay URL] [--group G] [--since N | --before P | --all] [--limit N] [--owe | --waiting] [--json]",
	summary: "show an agent's deliveries: must/may/must-not respond, injection",
	run:     runInbox,
}

var cmdAck = &command{
	name:    "ack",
	args:    "--agent A --group G EVENT-ID",
	summary: "acknowledge an attention message as an agent",
	run:     func(ctx context.Context, e *env, args []string) error { return runAction(ctx, e, "ack", args) },
}

var cmdClaim = &command{
	name:    "claim",
	args:    "--agent A --group G [--takeover-stale] EVENT-ID",
	summary: "claim an event (a role request) as an agent",
	run:     func(ctx context.Context, e *env, args []string) error { return runAction(ctx, e, "claim", args) },
}

var cmdDischarge = &command{
	name:    "discharge",
	args:    "--agent A --group G EVENT-ID",
	summary: "discharge an obligation you authored (or are the delegate of)",
	run:     func(ctx context.Context, e *env, args []string) error { return runAction(ctx, e, "discharge", args) },
}

// relayFlags are the flags of every command that talks to a relay.
type relayFlags struct {
	url   *string
	token *string
}

func addRelayFlags(fs *flag.FlagSet) relayFlags {
	def := os.Getenv("CROSSTALK_RELAY")
	if def == "" {
		def = "http://" + DefaultListen
	}
	return relayFlags{
		url:   fs.String("relay", def, "relay `URL` ($CROSSTALK_RELAY when set)"),
		token: fs.String("token", "", "bearer `token` (default $CROSSTALK_TOKEN)"),
	}
}

func (rf relayFlags) base() string { return strings.TrimRight(*rf.url, "/") }

// bearer is --token, or $CROSSTALK_TOKEN without it.
func (rf relayFlags) bearer() string { return tokenOrEnv(*rf.token) }

// tokenOrEnv is a --token flag's value, or $CROSSTALK_TOKEN when it is
// empty. The flags do not take the environment's token as their default:
// --help prints defaults, and would print the token.
func tokenOrEnv(flag string) string { return cmp.Or(flag, os.Getenv("CROSSTALK_TOKEN")) }

// client is the relay's API client for these flags.
func (rf relayFlags) client() *client.Client {
	return &client.Client{URL: rf.base(), Token: rf.bearer()}
}

// do sends a JSON request to the relay and decodes the answer into v;
// reads are retried on network errors, 429 and 5xx.
func (rf relayFlags) do(ctx context.Context, method, path, agent string, body io.Reader, v any) error {
	rq := client.Request{Method: method, Path: path, Agent: agent, Retry: method == http.MethodGet}
	if body != nil {
		b, err := io.ReadAll(body)
		if err != nil {
			return err
		}
		rq.Body = b
	}
	return rf.call(ctx, rq, v)
}

// relayHint follows an error that the relay cannot be reached.
const relayHint = "is the relay running? start it with `crosstalk relay` or pass --relay URL"

// tokenHint follows a relay's 401: the token is missing, mistyped,
// revoked, or minted in another data dir than the relay's.
const tokenHint = "the relay wants a token it knows: pass --token TOKEN or set CROSSTALK_TOKEN (a [[tokens]] token of its config, or one from `crosstalk token new` given the relay's --data DIR or --config FILE)"

// unauthorized reports whether err is the relay's 401 answer.
func unauthorized(err error) bool {
	var ce *client.Error
	var se *client.StatusError
	return errors.As(err, &ce) && ce.Status == http.StatusUnauthorized ||
		errors.As(err, &se) && se.Status == http.StatusUnauthorized
}

// call runs rq against the relay, with relayHint when it is unreachable.
func (rf relayFlags) call(ctx context.Context, rq client.Request, v any) error {
	err := rf.client().Do(ctx, rq, v)
	if errors.Is(err, client.ErrUnreachable) {
		return withHint(err, relayHint)
	}
	return err
}

func runSend(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, `
Send posts the envelopes found in each FILE (or standard input) to the relay's
POST /crosstalk/receive and prints the receipt envelopes. Transient failures are
retried with the same Idempotency-Key, so sending twice records once. Each
envelope the relay refuses is also one line on standard error: the FILE and
the ERROR receipt's reason, with its line; so is an envelope whose message id
the relay had already recorded with other content (an edited resend: the
receipt says Differs: true, and the first one stands).

Exit status: 0 if the relay recorded every envelope, 1 otherwise.`)
	rf := addRelayFlags(fs)
	retries := fs.Int("retries", 5, "retries on network errors and 429/5xx (0: none)")
	files, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if *retries < 0 {
		return usagef("send: --retries %d is negative; give 0 for no retries", *retries)
	}
	relay := rf.client()
	relay.Retries = *retries
	if relay.Retries == 0 {
		relay.Retries = -1 // client.Client reads 0 as its default
	}
	failed := false
	err = eachInput(e, files, func(in input) error {
		text, err := readLimited(in.r, gateway.MaxIntake, in.name)
		if err != nil {
			return err
		}
		rc, err := relay.Receive(ctx, text)
		if err != nil && rc == nil {
			return withHint(err, relayHint)
		}
		failed = failed || err != nil
		if _, werr := e.stdout.Write(rc.Body); werr != nil {
			return werr
		}
		// Each refusal on stderr too, naming the input: with stdout in a
		// file or several inputs, exit 1 alone does not say which one
		// failed or where.
		for _, r := range rc.Envelopes {
			if _, ok := r.MetaValue("error", "Code"); ok && r.Intent == envelope.IntentError {
				first, _, _ := strings.Cut(r.Body, "\n")
				fmt.Fprintln(e.stderr, visible(fmt.Sprintf("crosstalk: %s: refused by the relay: %s", in.name, first)))
			}
			if v, _ := r.MetaValue("receipt", "Differs"); v == "true" {
				// Recorded before with other content: this text was not.
				failed = true
				fmt.Fprintln(e.stderr, visible(fmt.Sprintf("crosstalk: %s: message %s was already recorded with other content; the relay kept the first (send a change with a new message id)", in.name, r.Parent)))
			}
		}
		if unauthorized(err) {
			// Nothing was read: every other input would be refused
			// alike, and stdout's ERROR envelope alone says nothing on
			// a terminal whose stdout goes to a file.
			return withHint(err, tokenHint)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if failed {
		return failedError{}
	}
	return nil
}

func runLog(ctx context.Context, e *env, args []string) (err error) {
	defer func() {
		// --follow ends only by the user's interrupt: whatever it was
		// doing then (a page read, connecting the stream), that is exit 0.
		if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
			err = nil
		}
	}()
	fs := newFlags(e, `
Log prints the relay's ledger: the last --limit events of a group (100), or
those before seq --before, or with seq > --since, or with --all every one (read
in pages), one line each (time, seq, kind, by, summary), or CCCS JSON with
--json; a page that is not the whole group ends with the command for the older
page on stderr. With --follow it
keeps printing new events as they arrive, reconnecting to a relay that went
away for up to --reconnect; it exits 0 only when interrupted, 1 when the relay
is gone or ends the stream with an error. Without --group it lists the groups.`)
	rf := addRelayFlags(fs)
	group := fs.String("group", "", "group to show")
	since := fs.Int64("since", 0, "show events with seq greater than `N`")
	before := fs.Int64("before", 0, "show the --limit events before seq `N`")
	limit := fs.Int("limit", 100, "how many events one page shows (at most 1000)")
	all := fs.Bool("all", false, "show every event of the group, read in pages")
	follow := fs.Bool("follow", false, "keep printing new events; exits 1 when the relay is gone")
	reconnect := fs.Duration("reconnect", client.DefaultReconnect, "with --follow, how long to try to reconnect to a lost relay (at most 30s)")
	asJSON := fs.Bool("json", false, "print CCCS events as JSON Lines")
	if pos, err := parseFlags(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return usagef("log: unexpected argument %q", pos[0])
	}
	if *reconnect <= 0 || *reconnect > client.DefaultReconnect {
		return usagef("log: --reconnect must be more than 0 and at most %s", client.DefaultReconnect)
	}
	if *limit < 1 || *limit > 1000 {
		return usagef("log: --limit must be 1 to 1000")
	}
	if n := btoi(*since > 0) + btoi(*before > 0) + btoi(*all); n > 1 {
		return usagef("log: give one of --since, --before and --all")
	}
	if *group == "" && !*follow {
		var gs struct {
			Groups []ledger.Group `json:"groups"`
		}
		if err := rf.do(ctx, "GET", "/v1/groups", "", nil, &gs); err != nil {
			return err
		}
		if *asJSON {
			return json.NewEncoder(e.stdout).Encode(gs)
		}
		if len(gs.Groups) == 0 {
			fmt.Fprintln(e.stdout, "no events yet")
			return nil
		}
		for _, g := range gs.Groups {
			fmt.Fprintf(e.stdout, "%s\t%d events\n", g.ID, g.LastSeq)
		}
		fmt.Fprintln(e.stderr, "hint: crosstalk log --group NAME shows a group's events")
		return nil
	}
	if *group == "" {
		*group = gateway.DefaultGroup
	}
	print := func(ev ledger.Event) error {
		if *asJSON {
			b, _ := json.Marshal(ev)
			_, err := fmt.Fprintf(e.stdout, "%s\n", b)
			return err
		}
		_, err := fmt.Fprintln(e.stdout, summarizeEvent(ev))
		return err
	}
	next := *since
	if *since == 0 && !*all {
		// The last page (before --before or the group's end): one read
		// of --limit events, whatever the group's history.
		var page struct {
			Events []ledger.Event `json:"events"`
			Prev   int64          `json:"prev_seq"`
		}
		q := url.Values{"before_seq": {fmt.Sprint(*before)}, "limit": {fmt.Sprint(*limit)}}
		if err := rf.do(ctx, "GET", "/v1/groups/"+client.PathSegment(*group)+"/events?"+q.Encode(), "", nil, &page); err != nil {
			return err
		}
		for _, ev := range page.Events {
			if err := print(ev); err != nil {
				return err
			}
			next = ev.Seq
		}
		if page.Prev > 0 && !*asJSON {
			fmt.Fprintf(e.stderr, "older: crosstalk log --group %s --before %d (or --all)\n", *group, page.Prev)
		}
		if !*follow {
			return nil
		}
		if *before == 0 && len(page.Events) > 0 {
			return followGroup(ctx, rf, *group, next, *reconnect, print)
		}
	}
	for {
		var page struct {
			Events  []ledger.Event `json:"events"`
			NextSeq int64          `json:"next_seq"`
		}
		q := url.Values{"since_seq": {fmt.Sprint(next)}}
		if err := rf.do(ctx, "GET", "/v1/groups/"+client.PathSegment(*group)+"/events?"+q.Encode(), "", nil, &page); err != nil {
			return err
		}
		for _, ev := range page.Events {
			if err := print(ev); err != nil {
				return err
			}
		}
		next = page.NextSeq
		if len(page.Events) > 0 {
			continue
		}
		if !*follow {
			return nil
		}
		return followGroup(ctx, rf, *group, next, *reconnect, print)
	}
}

// followGroup prints the group's events from its SSE stream as they come,
// resuming after the last one printed when the stream breaks. It returns
// nil when ctx ends (the user's interrupt); an error when the relay sends
// `event: error`, refuses the stream, or cannot be reached again within
// reconnect.
func followGroup(ctx context.Context, rf relayFlags, group string, since int64, reconnect time.Duration, print func(ledger.Event) error) error {
	path := func() string {
		return "/v1/groups/" + client.PathSegment(group) + "/stream?since_seq=" + strconv.FormatInt(since, 10)
	}
	err := rf.client().Follow(ctx, path, "", reconnect, func(event string, data []byte) error {
		if event != "event" {
			return nil
		}
		var ev ledger.Event
		if err := json.Unmarshal(data, &ev); err != nil {
			return fmt.Errorf("bad event on the stream: %w", err)
		}
		if ev.Seq <= since {
			return nil // seen before a reconnect
		}
		since = ev.Seq
		return print(ev)
	})
	if errors.Is(err, client.ErrUnreachable) || errors.Is(err, client.ErrStreamEnded) {
		return withHint(fmt.Errorf("following %s: %w", group, err), "the relay stopped; restart it and run the command again")
	}
	return err
}

// summarizeEvent is the one-line human form of an event.
func summarizeEvent(ev ledger.Event) string {
	d, _ := gateway.ParseData(ev)
	ts := ev.TS
	if t, err := ev.Time(); err == nil {
		ts = t.Local().Format(time.DateTime)
	}
	what := ""
	switch ev.Kind {
	case gateway.KindMessage:
		if x := d.X; x != nil && x.Envelope != nil {
			what = fmt.Sprintf("%s → %s %s", x.Envelope.From, x.Envelope.To, x.Envelope.Intent)
			if x.Envelope.Context != "" {
				what += " [" + x.Envelope.Context + "]"
			}
			what += " " + firstLine(d.Text, 60)
			what += " (" + x.Verification + ")"
		} else {
			what = firstLine(d.Text, 60)
		}
		if d.Priority == "attention" {
			what = "! " + what
		}
	case gateway.KindAck, gateway.KindRead, gateway.KindClaim:
		what = d.ActorID + " → " + d.EventID
	case gateway.KindReaction:
		what = d.ActorID + " " + d.Signal + " → " + d.EventID
	case gateway.KindDisposition:
		what = d.ActorID + " " + d.Disposition + " → " + d.EventID
	case gateway.KindDelivery:
		what = d.State + " → " + d.ActorID + ": " + d.Message
		if d.Note != "" {
			what += " (" + firstLine(d.Note, 60) + ")"
		}
	case gateway.KindNotify:
		what = d.Kind + ": " + firstLine(d.Message, 80)
	}
	return visible(fmt.Sprintf("%s  %4d  %-24s %-10s %s  %s", ts, ev.Seq, ev.Kind, ev.By, what, ev.ID))
}

func firstLine(s string, n int) string {
	s, _, cut := strings.Cut(s, "\n")
	if r := []rune(s); len(r) > n {
		s, cut = string(r[:n]), true
	}
	if cut {
		s += "…"
	}
	return fmt.Sprintf("%q", s)
}

func runInbox(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, `
Inbox shows what an agent should see of the ledger (C2A): for each event its
directedness (to_me, to_my_role, to_other, ambient), response policy
(must_respond, may_respond, must_not_respond), injection mode and — unless the
event is only a knock — its content. must_respond items come first. Without
--group or --since it shows one page: the agent's --limit newest deliveries over
every group (100), or those before ledger position --before; --all shows every
delivery of every group.
--owe lists only what the agent owes: open obligations addressed to it and
must_respond events it has neither acknowledged nor answered. --waiting lists
the open obligations it authored (or is the delegate of), with who answered.
With --owe or --waiting, --all adds the settled items (answered, acknowledged,
lapsed, discharged), hidden by default.`)
	rf := addRelayFlags(fs)
	agent := fs.String("agent", "", "agent `name` (required)")
	group := fs.String("group", "", "only this group")
	since := fs.Int64("since", 0, "only events with seq greater than `N` (with --group)")
	before := fs.Int64("before", 0, "the page before ledger position `P` (an older page)")
	limit := fs.Int("limit", 100, "how many deliveries one page shows (at most 1000)")
	all := fs.Bool("all", false, "every delivery of every group, not a page; with --owe or --waiting, the settled items too")
	asJSON := fs.Bool("json", false, "print JSON")
	owe := fs.Bool("owe", false, "only what the agent owes")
	waiting := fs.Bool("waiting", false, "the open obligations the agent authored or may discharge")
	if pos, err := parseFlags(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return usagef("inbox: unexpected argument %q", pos[0])
	}
	if *agent == "" {
		return usagef("inbox: --agent is required")
	}
	if *limit < 1 || *limit > 1000 {
		return usagef("inbox: --limit must be 1 to 1000")
	}
	if *owe && *waiting {
		return usagef("inbox: --owe and --waiting are two lists; ask for one")
	}
	if *waiting {
		return printWaiting(ctx, e, rf, *agent, *all, *asJSON)
	}
	q := url.Values{}
	if *group != "" {
		q.Set("group", *group)
	}
	if *since > 0 {
		q.Set("since_seq", fmt.Sprint(*since))
	}
	paged := *group == "" && *since == 0 && !*all && !*owe // --owe needs every group walked
	if paged {
		q.Set("before_pos", fmt.Sprint(*before))
		q.Set("limit", fmt.Sprint(*limit))
	}
	var res struct {
		Agent      string             `json:"agent"`
		Deliveries []gateway.Delivery `json:"deliveries"`
		Older      int64              `json:"older_pos,omitempty"`
	}
	if *owe {
		ds, err := openSet(ctx, rf, *all, func(rm *c2a.Remote, q gateway.OpenSetQuery) (gateway.Page[gateway.Delivery], error) {
			return rm.Owed(ctx, *agent, q)
		})
		if err != nil {
			return err
		}
		res.Agent, res.Deliveries = *agent, ds
	} else if err := rf.do(ctx, "GET", "/v1/agents/"+client.PathSegment(*agent)+"/deliveries?"+q.Encode(), *agent, nil, &res); err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetEscapeHTML(false)
		return enc.Encode(res)
	}
	if len(res.Deliveries) == 0 {
		fmt.Fprintf(e.stdout, "%s: nothing for you\n", res.Agent)
		printLiveness(ctx, e, rf, *agent)
		return nil
	}
	// Settled items (acknowledged, answered, discharged) owe nothing and
	// come last (issue #14), whatever their policy was.
	rank := map[string]int{"must_respond": 0, "ack_only": 1, "may_respond": 2, "must_not_respond": 3}
	rankOf := func(d gateway.Delivery) int {
		if d.Acked || d.Settled() != "" {
			return len(rank)
		}
		return rank[string(d.Policy)]
	}
	ds := res.Deliveries
	sortStable(ds, func(a, b gateway.Delivery) bool { return rankOf(a) < rankOf(b) })
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tSEQ\tPOLICY\tDIRECTED\tINJECTION\tFROM\tINTENT\tCONTENT\tEVENT")
	for _, d := range ds {
		content := firstLine(d.Content, 50)
		if n := len(d.Fragments); n > 0 { // a buffered delivery (docs/agents.md)
			content = fmt.Sprintf("(%d merged) %s", n, content)
		}
		if d.Knock != nil {
			content = "knock: " + d.Knock.Topic + " (pull with " + d.Knock.PullWith + ")"
		}
		policy := string(d.Policy)
		switch settled := d.Settled(); {
		case settled == "lapsed":
			policy = "lapsed (deadline passed unanswered)"
		case settled != "" && d.Protocol != nil:
			policy = "settled (" + d.Protocol.Label() + ", " + settled + ")"
		case settled != "":
			policy = "settled (" + settled + ")"
		case d.Protocol != nil:
			policy += " (" + d.Protocol.Label() + ": " + firstLine(d.Protocol.Subject, 30) + ")"
		case d.Obligation != nil:
			policy += " (obligation, blocks " + string(d.Obligation.Blocks) + ")"
		case d.Acked:
			policy = "settled (acknowledged)"
		}
		if d.ClaimedBy != "" {
			policy += " (claimed by " + d.ClaimedBy + ")"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", visible(d.Group), d.Seq, visible(policy), d.Directedness, d.Injection,
			visible(d.From), visible(d.Intent), visible(content), visible(d.EventID))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if paged && res.Older > 0 {
		fmt.Fprintf(e.stderr, "older: crosstalk inbox --agent %s --before %d\n", *agent, res.Older)
	}
	printLiveness(ctx, e, rf, *agent)
	return nil
}

// openSet reads every page of an open-set query (c2a.Remote.Owed or
// WaitingOn), with the settled items when all is set.
func openSet[T any](ctx context.Context, rf relayFlags, all bool, page func(*c2a.Remote, gateway.OpenSetQuery) (gateway.Page[T], error)) ([]T, error) {
	rm := &c2a.Remote{URL: rf.base(), Token: rf.bearer()}
	var items []T
	for q := (gateway.OpenSetQuery{All: all}); ; {
		p, err := page(rm, q)
		if errors.Is(err, client.ErrUnreachable) {
			return nil, withHint(err, relayHint)
		}
		if err != nil {
			return nil, err
		}
		items = append(items, p.Items...)
		if p.Next == "" || p.Next == q.After {
			return items, nil
		}
		q.After = p.Next
	}
}

// printWaiting prints GET /v1/agents/{agent}/waiting: the open
// obligations agent authored or may discharge, and with all the
// discharged ones.
func printWaiting(ctx context.Context, e *env, rf relayFlags, agent string, all, asJSON bool) error {
	ws, err := openSet(ctx, rf, all, func(rm *c2a.Remote, q gateway.OpenSetQuery) (gateway.Page[gateway.Waiting], error) {
		return rm.WaitingOn(ctx, agent, q)
	})
	if err != nil {
		return err
	}
	if ws == nil {
		ws = []gateway.Waiting{}
	}
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetEscapeHTML(false)
		return enc.Encode(map[string]any{"agent": agent, "waiting": ws})
	}
	if len(ws) == 0 {
		fmt.Fprintf(e.stdout, "%s: waiting on nothing\n", agent)
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tSEQ\tTO\tBLOCKS\tDEADLINE\tDEFAULT ACTION\tANSWERED BY\tSTATE\tEVENT")
	for _, w := range ws {
		deadline := "-"
		if !w.Obligation.Deadline.IsZero() {
			deadline = w.Obligation.Deadline.UTC().Format(time.RFC3339)
			if w.Lapsed {
				deadline += " (lapsed)"
			}
		}
		answered := strings.Join(w.Evidence, ",")
		if answered == "" {
			answered = "-"
		}
		to := strings.Join(w.To, ",")
		if w.Protocol != nil {
			to = w.Protocol.Label() + " " + to // BeadBoard §6.3
		}
		state := "open"
		switch {
		case w.DischargedBy != "":
			state = "discharged by " + w.DischargedBy
		case w.ResolvedBy != "":
			state = "resolved by " + w.ResolvedBy
		case w.Protocol != nil && w.Protocol.EventType == gateway.ProtocolHandoff && len(w.Acked) > 0:
			state = "accepted by " + strings.Join(w.Acked, ",")
		case len(w.Acked) > 0:
			state = "open, accepted by " + strings.Join(w.Acked, ",")
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", visible(w.Group), w.Seq, visible(to), visible(string(w.Obligation.Blocks)),
			deadline, firstLine(w.Obligation.DefaultAction, 40), visible(answered), visible(state), visible(w.EventID))
	}
	return tw.Flush()
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// printLiveness ends the human output of `crosstalk inbox` with the
// agent's liveness from GET /v1/agents, when the relay serves it (an older
// relay does not: the per-delivery liveness in --json is all there is).
func printLiveness(ctx context.Context, e *env, rf relayFlags, agent string) {
	rm := &c2a.Remote{URL: rf.base(), Token: rf.bearer(), Retries: -1}
	as, err := rm.Agents(ctx)
	if err != nil {
		return
	}
	for _, a := range as {
		if strings.EqualFold(a.ID, agent) {
			seen := "never seen since the relay started"
			if !a.LastSeen.IsZero() {
				seen = "last seen " + time.Since(a.LastSeen).Round(time.Second).String() + " ago"
			}
			fmt.Fprintf(e.stdout, "liveness: %s is %s (%s)\n", a.ID, a.Liveness, seen)
		}
	}
}

func sortStable[T any](s []T, less func(a, b T) bool) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && less(s[j], s[j-1]); j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func runAction(ctx context.Context, e *env, action string, args []string) error {
	rule := map[string]string{
		"ack": `Ack records the agent's acknowledgement of an attention message addressed to
it (CCCS §6.2: acks are self-only, and only attention messages take one).`,
		"claim": `Claim records the agent's claim on the event: the first claim wins, and it
lasts the relay's claim_ttl.`,
		"discharge": `Discharge records the discharge of the event's obligation by the agent, its
author or delegate; anyone else is refused (docs/agents.md "Obligations").`,
	}[action]
	fs := newFlags(e, `
`+rule+`
With tokens configured, --agent must be the token's principal.`)
	rf := addRelayFlags(fs)
	agent := fs.String("agent", "", "agent `name` acting (required)")
	group := fs.String("group", gateway.DefaultGroup, "group of the event")
	asJSON := fs.Bool("json", false, "print the recorded event as JSON")
	var takeover *bool
	if action == "claim" {
		takeover = fs.Bool("takeover-stale", false, "take over the claim of a stale holder (an evicted holder's is released anyway; an active holder's never)")
	}
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || *agent == "" {
		return usagef("%s: want --agent A [--group G] EVENT-ID", action)
	}
	body := "{}"
	if takeover != nil && *takeover {
		body = `{"takeover_stale":true}`
	}
	var res gateway.ActionResult
	path := "/v1/groups/" + client.PathSegment(*group) + "/events/" + url.PathEscape(pos[0]) + "/" + action
	if err := rf.do(ctx, "POST", path, *agent, strings.NewReader(body), &res); err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(e.stdout).Encode(res)
	}
	msg := fmt.Sprintf("%s: %s recorded as event %s (seq %d)", *agent, action, res.Event.ID, res.Event.Seq)
	if res.Duplicate {
		msg += " — already recorded before"
	}
	if res.Claim != nil {
		msg += fmt.Sprintf(", claim until %s", res.Claim.ExpiresAt.Local().Format(time.TimeOnly))
	}
	fmt.Fprintln(e.stdout, msg)
	return nil
}
