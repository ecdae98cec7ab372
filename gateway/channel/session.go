package channel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/c2a"
)

// Defaults of Options.
const (
	DefaultMaxMessage  = 1 << 20
	DefaultMaxAttempts = 5
	DefaultAckTimeout  = 10 * time.Second
	DefaultMaxBackoff  = 2 * time.Minute
	DefaultWindow      = 16
	DefaultHeartbeat   = 15 * time.Second
	// missedPings closes the channel after this many unanswered pings.
	missedPings = 3
	// groupPoll is how often a channel over every group looks for new
	// groups.
	groupPoll = 2 * time.Second
	// touchEvery throttles liveness updates from harness traffic.
	touchEvery = 5 * time.Second
)

// Options configure a channel session.
type Options struct {
	// Agent is the agent the harness runs; required.
	Agent string
	// Backend is the relay; required.
	Backend c2a.Backend
	// Group limits the channel to one group; "" is every group.
	Group string
	// Logger receives the session's logs; nil discards them. Bodies are
	// never logged.
	Logger *slog.Logger
	// MaxMessage bounds one incoming message; DefaultMaxMessage when 0.
	MaxMessage int
	// MaxAttempts bounds deliveries of one event; DefaultMaxAttempts
	// when 0.
	MaxAttempts int
	// AckTimeout is how long the first attempt waits for an
	// acknowledgement; each further attempt waits twice as long, up to
	// MaxBackoff. DefaultAckTimeout and DefaultMaxBackoff when 0.
	AckTimeout, MaxBackoff time.Duration
	// Window bounds unacknowledged deliveries in flight; DefaultWindow
	// when 0.
	Window int
	// Heartbeat is the ping interval; DefaultHeartbeat when 0.
	Heartbeat time.Duration
	// Version is reported in serverInfo.
	Version string
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// ErrUnacknowledged ends a session whose harness did not acknowledge a
// delivery after MaxAttempts.
var ErrUnacknowledged = errors.New("channel: delivery not acknowledged")

// ErrHeartbeat ends a session whose harness stopped answering pings.
var ErrHeartbeat = errors.New("channel: harness stopped answering pings")

// hostInjection, hostTools, hostUtilities are what the host supports.
var (
	hostDelivery  = map[string]bool{"ack": true, "redelivery": true, "idempotency": true}
	hostInjection = map[string]bool{"immediate": true, "buffered": true, "notify": true, "tool_mailbox": true, "digest": true, "interrupt": false}
	hostTools     = map[string]bool{"readThread": false, "sendMessage": false, "react": true, "reactionSignals": true, "claim": true, "defer": true, "resolve": true}
	hostUtilities = map[string]bool{"progress": true, "cancellation": true, "logging": true}
)

type pending struct {
	d        gateway.Delivery
	attempt  int
	id       string // request id of the latest attempt
	deadline time.Time
}

type groupState struct {
	inflight []*pending // in seq order
	acked    map[string]bool
	queued   int64 // highest seq received from the feed
	follow   bool
}

type feedItem struct {
	group string
	d     gateway.Delivery
}

type session struct {
	opts   Options
	conn   Conn
	log    *slog.Logger
	now    func() time.Time
	ctx    context.Context
	cancel context.CancelFunc

	initialized bool
	caps        Capabilities
	progress    any // progress token, nil when the harness wants none

	pending    map[string]*pending // by event id
	done       recentSet           // events acknowledged in this session, the latest maxRememberedDone
	groups     map[string]*groupState
	inflight   int
	resumeAt   int64 // the ledger position followAll starts after (c2a.Resumer)
	backlog    int   // deliveries stored before the session began, not yet acked
	backlogAll int
	feed       chan feedItem
	pingSeq    int
	pings      map[string]bool
	lastTouch  time.Time
}

// Serve runs one channel session on conn for opts.Agent until the harness
// disconnects, ctx ends, or the session fails (ErrUnacknowledged,
// ErrHeartbeat). It closes conn.
func Serve(ctx context.Context, conn Conn, opts Options) error {
	if opts.Agent == "" || opts.Backend == nil {
		return errors.New("channel: Options need Agent and Backend")
	}
	s := newSession(ctx, conn, opts)
	defer s.cancel()
	err := s.run()
	if errors.Is(err, errPeerGone) {
		err = nil
	}
	reason := "bye"
	if err != nil {
		reason = err.Error()
	}
	s.cancel()
	conn.Close(reason)
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil
	}
	return err
}

// newSession returns the state of a session on conn with opts (defaults
// filled in) under ctx; cancel ends it.
func newSession(ctx context.Context, conn Conn, opts Options) *session {
	if opts.MaxMessage <= 0 {
		opts.MaxMessage = DefaultMaxMessage
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = DefaultMaxAttempts
	}
	if opts.AckTimeout <= 0 {
		opts.AckTimeout = DefaultAckTimeout
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = DefaultMaxBackoff
	}
	if opts.Window <= 0 {
		opts.Window = DefaultWindow
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = DefaultHeartbeat
	}
	s := &session{opts: opts, conn: conn, log: opts.Logger, now: opts.Now,
		pending: map[string]*pending{}, done: recentSet{m: map[string]struct{}{}},
		groups: map[string]*groupState{}, feed: make(chan feedItem), pings: map[string]bool{}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.log = s.log.With("agent", opts.Agent)
	if s.now == nil {
		s.now = time.Now
	}
	s.ctx, s.cancel = context.WithCancel(ctx)
	return s
}

// maxRememberedDone bounds the acknowledged events a session remembers,
// to answer a repeated chat/ack as a duplicate and to ignore a late
// answer to an earlier attempt: a channel open for months must not keep
// every delivery it settled.
const maxRememberedDone = 1 << 14

// recentSet is a set of at most maxRememberedDone strings: adding one
// more drops the oldest.
type recentSet struct {
	m    map[string]struct{}
	ring []string
	next int
}

func (r *recentSet) has(k string) bool { _, ok := r.m[k]; return ok }

func (r *recentSet) len() int { return len(r.m) }

func (r *recentSet) add(k string) {
	if r.has(k) {
		return
	}
	if len(r.ring) < maxRememberedDone {
		r.ring = append(r.ring, k)
	} else {
		delete(r.m, r.ring[r.next])
		r.ring[r.next] = k
		r.next = (r.next + 1) % maxRememberedDone
	}
	r.m[k] = struct{}{}
}

// errPeerGone ends a session whose harness closed the connection: a
// normal end.
var errPeerGone = errors.New("channel: the harness closed the connection")

type readItem struct {
	msg []byte
	err error
}

func (s *session) run() error {
	// The reader hands over one message at a time and reads the next only
	// once the main loop has handled it, so a harness that acknowledges
	// and then closes cleanly finds its acknowledgements recorded (the
	// close frame is answered only after them).
	in := make(chan readItem)
	handled := make(chan struct{})
	go func() {
		for {
			b, err := s.conn.Read(s.ctx)
			select {
			case in <- readItem{b, err}:
			case <-s.ctx.Done():
				return
			}
			select {
			case <-handled:
			case <-s.ctx.Done():
				return
			}
			var tl *TooLargeError
			if err != nil && !errors.As(err, &tl) && !errors.Is(err, errBinary) {
				return
			}
		}
	}()
	tick := time.NewTicker(max(10*time.Millisecond, min(s.opts.AckTimeout/5, 500*time.Millisecond)))
	defer tick.Stop()
	heart := time.NewTicker(s.opts.Heartbeat)
	defer heart.Stop()
	poll := time.NewTicker(groupPoll)
	defer poll.Stop()
	for {
		feed := s.feed
		if !s.initialized || s.inflight >= s.opts.Window {
			feed = nil // backpressure: the followers wait
		}
		select {
		case it := <-in:
			err := s.onRead(it)
			select {
			case handled <- struct{}{}:
			case <-s.ctx.Done(): // the reader has quit: nobody takes it
			}
			if err != nil {
				return err
			}
		case it := <-feed:
			if err := s.onFeed(it); err != nil {
				return err
			}
		case <-tick.C:
			if err := s.redeliver(); err != nil {
				return err
			}
		case <-heart.C:
			if err := s.heartbeat(); err != nil {
				return err
			}
		case <-poll.C:
			if s.initialized && s.opts.Group == "" {
				if err := s.discover(); err != nil {
					s.log.Warn("listing groups", "err", err)
				}
			}
		case <-s.ctx.Done():
			return s.ctx.Err()
		}
	}
}

// send writes one message.
func (s *session) send(m Message) error {
	m.JSONRPC = "2.0"
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("channel: encoding: %w", err)
	}
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	if err := s.conn.Write(ctx, b); err != nil {
		return fmt.Errorf("channel: writing to the harness: %w", err)
	}
	return nil
}

func (s *session) reply(id json.RawMessage, result any) error {
	b, err := json.Marshal(result)
	if err != nil {
		return fmt.Errorf("channel: encoding: %w", err)
	}
	return s.send(Message{ID: id, Result: b})
}

func (s *session) replyErr(id json.RawMessage, e *Error) error {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	return s.send(Message{ID: id, Error: e})
}

func (s *session) notify(method string, params any) error {
	b, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("channel: encoding: %w", err)
	}
	return s.send(Message{Method: method, Params: b})
}

func (s *session) touch() {
	if now := s.now(); now.Sub(s.lastTouch) >= touchEvery {
		s.lastTouch = now
		if err := s.opts.Backend.Touch(s.ctx, s.opts.Agent); err != nil {
			s.log.Warn("marking the agent seen", "err", err)
		}
	}
}

func (s *session) onRead(it readItem) error {
	var tl *TooLargeError
	switch {
	case errors.As(it.err, &tl):
		return s.replyErr(nil, rpcErr(CodeInvalidRequest, "message of %d bytes exceeds the limit of %d bytes", tl.Size, tl.Limit))
	case errors.Is(it.err, errBinary):
		return s.replyErr(nil, rpcErr(CodeInvalidRequest, "binary message: send JSON-RPC as text"))
	case it.err != nil:
		if s.ctx.Err() != nil {
			return s.ctx.Err()
		}
		return errPeerGone
	}
	s.touch()
	var m Message
	if err := json.Unmarshal(it.msg, &m); err != nil {
		switch trimmed := trimSpace(it.msg); {
		case !json.Valid(trimmed):
			return s.replyErr(nil, rpcErr(CodeParseError, "not a JSON-RPC message: %v", err))
		case trimmed[0] == '[':
			return s.replyErr(nil, rpcErr(CodeInvalidRequest, "a batch (JSON array) is not taken: send one JSON-RPC message object at a time"))
		default:
			return s.replyErr(nil, rpcErr(CodeInvalidRequest, "not one JSON-RPC message object: %v", err))
		}
	}
	if !validID(m.ID) {
		// JSON-RPC 2.0 §4: a string, a number or null. Another is not
		// echoed back: the answer's id is null.
		return s.replyErr(nil, rpcErr(CodeInvalidRequest, "an id is a string, a number or null"))
	}
	if m.JSONRPC != "2.0" {
		return s.replyErr(m.ID, rpcErr(CodeInvalidRequest, `"jsonrpc" must be "2.0"`))
	}
	switch {
	case m.IsResponse():
		return s.onResponse(m)
	case m.IsRequest():
		res, e := s.onRequest(m)
		if e != nil {
			return s.replyErr(m.ID, e)
		}
		if err := s.reply(m.ID, res); err != nil {
			return err
		}
		if m.Method == "initialize" && s.initialized {
			return s.start()
		}
		return nil
	case m.IsNotification():
		s.onNotification(m)
		return nil
	}
	return s.replyErr(m.ID, rpcErr(CodeInvalidRequest, "neither a request, a notification nor a response"))
}

func decodeParams(raw json.RawMessage, v any) *Error {
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return rpcErr(CodeInvalidParams, "bad params: %v", err)
	}
	return nil
}

func (s *session) onRequest(m Message) (any, *Error) {
	if m.Method == "ping" {
		return struct{}{}, nil
	}
	if m.Method == "initialize" {
		return s.initialize(m.Params)
	}
	if !s.initialized {
		return nil, rpcErr(CodeNotInitialized, "not initialized: send initialize first")
	}
	switch m.Method {
	case "chat/ack":
		var p AckParams
		if e := decodeParams(m.Params, &p); e != nil {
			return nil, e
		}
		if p.EventID == "" {
			return nil, rpcErr(CodeInvalidParams, "chat/ack needs eventId")
		}
		if s.done.has(p.EventID) {
			return map[string]any{"eventId": p.EventID, "duplicate": true}, nil
		}
		pd, ok := s.pending[p.EventID]
		if !ok {
			return nil, rpcErr(CodeInvalidParams, "event %q was never delivered on this channel", p.EventID)
		}
		if err := s.ack(pd, AckResult{Disposition: p.Disposition, Note: p.Note}); err != nil {
			return nil, rpcErr(CodeInternal, "recording the acknowledgement: %v", err)
		}
		return map[string]any{"eventId": p.EventID}, nil
	case "chat/react", "chat/claim", "chat/defer", "chat/resolve":
		return s.action(m.Method, m.Params)
	}
	return nil, rpcErr(CodeMethodNotFound, "unknown method %q", m.Method)
}

func (s *session) initialize(raw json.RawMessage) (any, *Error) {
	if s.initialized {
		return nil, rpcErr(CodeInvalidRequest, "already initialized")
	}
	var p InitializeParams
	if e := decodeParams(raw, &p); e != nil {
		return nil, e
	}
	if p.ProtocolVersion == "" {
		return nil, rpcErr(CodeInvalidParams, "initialize needs protocolVersion (this host speaks %s)", c2a.ProtocolVersion)
	}
	s.caps = Capabilities{
		Delivery:  intersect(hostDelivery, p.Capabilities.Delivery, true),
		Injection: intersect(hostInjection, p.Capabilities.Injection, false),
		ChatTools: intersect(hostTools, p.Capabilities.ChatTools, false),
		Utilities: intersect(hostUtilities, p.Capabilities.Utilities, false),
	}
	// A harness that declares no injection modes gets them all: it asked
	// for nothing to be held back.
	if len(p.Capabilities.Injection) == 0 {
		s.caps.Injection = intersect(hostInjection, nil, true)
	}
	s.caps.Injection["tool_mailbox"] = true
	if s.caps.Utilities["progress"] {
		s.progress = "resume"
		if t, ok := p.Meta["progressToken"]; ok {
			s.progress = t
		}
	}
	resume := map[string]int64{}
	groups, err := s.groupIDs()
	if err != nil {
		return nil, backendErr(err, "listing groups: %v", err)
	}
	// Every group's resume point in one call: a call per group cost, over
	// a remote relay, one read of every group's cursors each. A channel
	// over every group learns, from the same read, the ledger position to
	// follow from (followAll).
	var cursors map[string]int64
	if rs, ok := s.opts.Backend.(c2a.Resumer); ok && s.opts.Group == "" {
		cursors, s.resumeAt, err = rs.Resume(s.ctx, s.opts.Agent)
	} else {
		cursors, err = s.opts.Backend.Cursors(s.ctx, s.opts.Agent)
	}
	if err != nil {
		return nil, backendErr(err, "reading the resume points: %v", err)
	}
	for _, g := range groups {
		seq := cursors[g]
		resume[g] = seq
		s.groups[g] = &groupState{acked: map[string]bool{}, queued: seq}
	}
	s.initialized = true
	version := s.opts.Version
	if version == "" {
		version = "dev"
	}
	return InitializeResult{
		ProtocolVersion: c2a.ProtocolVersion,
		ServerInfo:      map[string]any{"name": "crosstalk", "version": version},
		Agent:           s.opts.Agent,
		Capabilities:    s.caps,
		Instructions:    c2a.ResponseRules,
		Resume:          resume,
		Limits: Limits{MaxMessageBytes: s.opts.MaxMessage, MaxAttempts: s.opts.MaxAttempts,
			AckTimeoutMs: s.opts.AckTimeout.Milliseconds(), Window: s.opts.Window, HeartbeatMs: s.opts.Heartbeat.Milliseconds()},
	}, nil
}

// backendErr is the JSON-RPC error of a relay call that failed: -32003
// when the relay refused the agent (a token of another principal, over
// `crosstalk harness --relay`), with its code, else -32603.
func backendErr(err error, format string, args ...any) *Error {
	var ae *gateway.ActionError
	if errors.As(err, &ae) && ae.Code == gateway.CodePermission {
		e := rpcErr(CodePermissionDenied, format, args...)
		e.Data["code"] = ae.Code
		return e
	}
	return rpcErr(CodeInternal, format, args...)
}

// intersect keeps the host's features the peer supports too; with
// defaultTrue a feature the peer does not mention counts as supported.
func intersect(host, peer map[string]bool, defaultTrue bool) map[string]bool {
	out := map[string]bool{}
	for k, v := range host {
		pv, ok := peer[k]
		if !ok {
			pv = defaultTrue
		}
		out[k] = v && pv
	}
	return out
}

func (s *session) groupIDs() ([]string, error) {
	if s.opts.Group != "" {
		return []string{s.opts.Group}, nil
	}
	gs, err := s.opts.Backend.Groups(s.ctx)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(gs))
	for i, g := range gs {
		out[i] = g.ID
	}
	return out, nil
}

// backlogPage is how many deliveries countBacklog reads at once.
const backlogPage = 1000

// countBacklog counts the agent's deliveries of group after seq a page at
// a time, so that a harness connecting to a relay a year old does not
// make it hold the whole backlog to count it.
func (s *session) countBacklog(group string, seq int64) (int, error) {
	n := 0
	for {
		ds, err := s.opts.Backend.Deliveries(s.ctx, s.opts.Agent, group, seq, backlogPage)
		if err != nil {
			return n, err
		}
		n += len(ds)
		if len(ds) < backlogPage {
			return n, nil
		}
		seq = ds[len(ds)-1].Seq
	}
}

// start counts the backlog and starts following every group.
func (s *session) start() error {
	for g, st := range s.groups {
		if s.progress != nil {
			n, err := s.countBacklog(g, st.queued)
			if err != nil {
				return fmt.Errorf("channel: counting the backlog of %s: %w", g, err)
			}
			s.backlog += n
		}
		if s.opts.Group != "" {
			s.follow(g, st)
		}
	}
	if s.opts.Group == "" {
		s.followAll()
	}
	s.backlogAll = s.backlog
	if s.progress != nil && s.backlogAll > 0 {
		return s.notify("notifications/progress", map[string]any{"progressToken": s.progress, "progress": 0,
			"total": s.backlogAll, "message": "replaying stored deliveries"})
	}
	return nil
}

// discover adds the state of groups created since the session began. A
// channel over every group receives their deliveries from followAll, which
// creates the state itself (onFeed); discover only learns their cursors
// early.
func (s *session) discover() error {
	ids, err := s.groupIDs()
	if err != nil {
		return err
	}
	for _, g := range ids {
		if _, ok := s.groups[g]; ok {
			continue
		}
		seq, err := s.opts.Backend.Cursor(s.ctx, s.opts.Agent, g)
		if err != nil {
			return err
		}
		s.groups[g] = &groupState{acked: map[string]bool{}, queued: seq}
	}
	return nil
}

// followAll starts the one goroutine of a channel over every group: it
// feeds the agent's deliveries of every group in ledger order
// (Backend.FollowAll) from the position the backend gave with the
// cursors (c2a.Resumer; the start of the ledger from a backend that is
// none), and the session drops those at or below each group's cursor.
// Every delivery before that position is one it would drop: a (re)connect
// reads the ledger from the agent's first unconfirmed delivery, not from
// its start. One stream, read in pages,
// whatever the number of groups: a follower per group held a page of
// each group and, over a remote relay, one HTTP stream each (over the
// relay's stream_limit beyond 32 groups). When the stream fails it
// follows again from the last position it passed on, after a pause.
func (s *session) followAll() {
	pos := s.resumeAt
	go func() {
		for s.ctx.Err() == nil {
			for d, err := range s.opts.Backend.FollowAll(s.ctx, s.opts.Agent, pos) {
				if err != nil {
					if s.ctx.Err() == nil {
						s.log.Warn("delivery stream failed; following again", "after_position", pos, "err", err)
					}
					break
				}
				select {
				case s.feed <- feedItem{group: d.Group, d: d}:
					pos = d.Position
				case <-s.ctx.Done():
					return
				}
			}
			select {
			case <-time.After(time.Second):
			case <-s.ctx.Done():
			}
		}
	}()
}

// follow starts a goroutine feeding the group's deliveries after
// st.queued into the session. When the relay's stream fails (a remote
// relay restarting), it follows again from the last delivery it passed on,
// after a pause; the session drops what it has already seen.
func (s *session) follow(group string, st *groupState) {
	if st.follow {
		return
	}
	st.follow = true
	since := st.queued
	go func() {
		for s.ctx.Err() == nil {
			for d, err := range s.opts.Backend.Follow(s.ctx, s.opts.Agent, group, since) {
				if err != nil {
					if s.ctx.Err() == nil {
						s.log.Warn("delivery stream failed; following again", "group", group, "err", err)
					}
					break
				}
				select {
				case s.feed <- feedItem{group: group, d: d}:
					since = d.Seq
				case <-s.ctx.Done():
					return
				}
			}
			select {
			case <-time.After(time.Second):
			case <-s.ctx.Done():
			}
		}
	}()
}

func (s *session) onFeed(it feedItem) error {
	st := s.groups[it.group]
	if st == nil { // a group created since discover last looked
		seq, err := s.opts.Backend.Cursor(s.ctx, s.opts.Agent, it.group)
		if err != nil {
			return fmt.Errorf("channel: reading the resume point of %s: %w", it.group, err)
		}
		st = &groupState{acked: map[string]bool{}, queued: seq}
		s.groups[it.group] = st
	}
	d := it.d
	if d.Seq <= st.queued || s.done.has(d.EventID) || s.pending[d.EventID] != nil {
		return nil // already handled in this session
	}
	st.queued = d.Seq
	if d.Intent == "CLOSE" && d.Thread != "" {
		if err := s.supersede(d); err != nil {
			return err
		}
	}
	p := &pending{d: d}
	st.inflight = append(st.inflight, p)
	s.pending[d.EventID] = p
	s.inflight++
	return s.deliver(p)
}

// ackWait is how long attempt (from 1) of a delivery waits for its
// acknowledgement: first, doubled for each further attempt, at most
// limit.
func ackWait(first, limit time.Duration, attempt int) time.Duration {
	wait := first
	for i := 1; i < attempt && wait < limit; i++ {
		wait *= 2
	}
	return min(wait, limit)
}

// deliveryID is the request id of attempt n of a delivery of event.
func deliveryID(event string, n int) string { return "deliver-" + event + "-" + strconv.Itoa(n) }

// parseDeliveryID returns the event and attempt of a request id that
// deliveryID made; the session keeps no table of them.
func parseDeliveryID(id string) (event string, attempt int, ok bool) {
	rest, ok := strings.CutPrefix(id, "deliver-")
	i := strings.LastIndexByte(rest, '-')
	if !ok || i <= 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(rest[i+1:])
	if err != nil || n < 1 || deliveryID(rest[:i], n) != id {
		return "", 0, false
	}
	return rest[:i], n, true
}

// deliver sends the next attempt of p.
func (s *session) deliver(p *pending) error {
	p.attempt++
	p.id = deliveryID(p.d.EventID, p.attempt)
	p.deadline = s.now().Add(ackWait(s.opts.AckTimeout, s.opts.MaxBackoff, p.attempt))
	ev := c2a.FromDelivery(p.d, p.attempt, s.now())
	if !s.caps.Injection[string(ev.Injection.Mode)] {
		ev.Injection.Mode = attention.ToolMailbox
	}
	params, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("channel: encoding: %w", err)
	}
	id, _ := json.Marshal(p.id)
	s.log.Debug("delivering", "event", p.d.EventID, "group", p.d.Group, "seq", p.d.Seq, "attempt", p.attempt)
	return s.send(Message{ID: id, Method: "chat/deliver", Params: params})
}

// redeliver retries deliveries whose acknowledgement is overdue, and gives
// up after MaxAttempts.
func (s *session) redeliver() error {
	now := s.now()
	for _, st := range s.groups {
		for _, p := range st.inflight {
			if st.acked[p.d.EventID] || now.Before(p.deadline) {
				continue
			}
			if p.attempt >= s.opts.MaxAttempts {
				return s.giveUp(p)
			}
			if err := s.deliver(p); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *session) giveUp(p *pending) error {
	reason := fmt.Sprintf("event %s was not acknowledged after %d attempts", p.d.EventID, p.attempt)
	s.log.Warn("giving up on a delivery", "event", p.d.EventID, "group", p.d.Group, "attempts", p.attempt)
	if err := s.notify("notifications/cancelled", map[string]any{"requestId": p.id, "reason": reason}); err != nil {
		s.log.Debug("telling the harness", "err", err)
	}
	if err := s.opts.Backend.Notify(s.ctx, s.opts.Agent, p.d.Group, p.d.EventID, "delivery_failed",
		reason+" on the agent channel; it stays unacknowledged and is redelivered on the next connection"); err != nil {
		s.log.Error("recording the failed delivery", "err", err)
	}
	return fmt.Errorf("%w: %s", ErrUnacknowledged, reason)
}

// supersede cancels pending deliveries of the thread a CLOSE ends.
func (s *session) supersede(closing gateway.Delivery) error {
	st := s.groups[closing.Group]
	for _, p := range st.inflight {
		if st.acked[p.d.EventID] || p.d.Thread != closing.Thread {
			continue
		}
		if s.caps.Utilities["cancellation"] {
			if err := s.notify("notifications/cancelled", map[string]any{"requestId": p.id,
				"reason": "superseded: thread " + closing.Thread + " was closed by " + closing.From}); err != nil {
				return err
			}
		}
		if err := s.settle(p); err != nil {
			return err
		}
	}
	return nil
}

func (s *session) onResponse(m Message) error {
	var id string
	if err := json.Unmarshal(m.ID, &id); err != nil {
		s.log.Warn("response with a non-string id", "id", string(m.ID))
		return s.warn("response to unknown request id " + string(m.ID))
	}
	if s.pings[id] {
		delete(s.pings, id)
		return nil
	}
	evID, attempt, ok := parseDeliveryID(id)
	p := s.pending[evID]
	if !ok || p == nil || attempt > p.attempt {
		if ok && s.done.has(evID) {
			return nil // a late answer to an earlier attempt
		}
		return s.warn("response to unknown request id " + id + ": no such delivery is pending")
	}
	var res AckResult
	if m.Error == nil && len(m.Result) > 0 && string(m.Result) != "null" {
		if err := json.Unmarshal(m.Result, &res); err != nil {
			return s.warn(fmt.Sprintf("acknowledgement of %s: bad result: %v; it will be redelivered", evID, err))
		}
	}
	if m.Error != nil || (res.Accepted != nil && !*res.Accepted) {
		// Refused: redeliver after the backoff, not at once.
		s.log.Info("harness refused a delivery", "event", evID, "attempt", p.attempt)
		if p.attempt >= s.opts.MaxAttempts {
			return s.giveUp(p)
		}
		return nil
	}
	if err := s.ack(p, res); err != nil {
		return fmt.Errorf("channel: recording the acknowledgement of %s: %w", evID, err)
	}
	return nil
}

// warn sends the harness a logging notification.
func (s *session) warn(msg string) error {
	if !s.caps.Utilities["logging"] {
		return nil
	}
	return s.notify("notifications/message", map[string]any{"level": "warning", "logger": "crosstalk", "data": map[string]any{"reason": msg}})
}

// ack records p's acknowledgement and disposition and moves the cursor.
func (s *session) ack(p *pending, res AckResult) error {
	if err := s.disposition(p.d, res); err != nil {
		var ae *gateway.ActionError
		if !errors.As(err, &ae) {
			return err
		}
		if werr := s.warn(fmt.Sprintf("disposition %s of %s not recorded: %s: %s", res.Disposition, p.d.EventID, ae.Code, ae.Reason)); werr != nil {
			return werr
		}
	}
	return s.settle(p)
}

// settle marks p done and moves the group's delivery cursor (never the
// read cursor) over every leading settled delivery.
func (s *session) settle(p *pending) error {
	st := s.groups[p.d.Group]
	st.acked[p.d.EventID] = true
	s.done.add(p.d.EventID)
	var last *pending
	for len(st.inflight) > 0 && st.acked[st.inflight[0].d.EventID] {
		last = st.inflight[0]
		delete(st.acked, last.d.EventID)
		delete(s.pending, last.d.EventID)
		st.inflight = st.inflight[1:]
		s.inflight--
		if s.backlog > 0 {
			s.backlog--
		}
	}
	if last == nil {
		return nil
	}
	if _, err := s.opts.Backend.Act(s.ctx, gateway.ActionRequest{Action: gateway.ActionDelivered, Group: last.d.Group,
		EventID: last.d.EventID, Actor: s.opts.Agent}); err != nil {
		return err
	}
	if s.progress != nil && s.backlogAll > 0 {
		done := s.backlogAll - s.backlog
		if err := s.notify("notifications/progress", map[string]any{"progressToken": s.progress, "progress": done,
			"total": s.backlogAll, "message": "replaying stored deliveries"}); err != nil {
			return err
		}
		if s.backlog == 0 {
			s.backlogAll = 0
		}
	}
	return nil
}

// disposition records how the harness says the event ended.
func (s *session) disposition(d gateway.Delivery, res AckResult) error {
	if res.Disposition == "" {
		return nil
	}
	disp, err := attention.ParseDisposition(res.Disposition)
	if err != nil {
		return &gateway.ActionError{Code: gateway.CodeInvalid, Reason: err.Error()}
	}
	act := func(a gateway.Action, signal string) error {
		_, err := s.opts.Backend.Act(s.ctx, gateway.ActionRequest{Action: a, Group: d.Group, EventID: d.EventID,
			Actor: s.opts.Agent, Signal: signal, Note: res.Note})
		return err
	}
	switch disp {
	case attention.Acknowledged:
		if err := act(gateway.ActionReact, string(attention.SignalSeen)); err != nil {
			return err
		}
		if d.Directedness == attention.ToMe && !d.Acked {
			var ae *gateway.ActionError
			if err := act(gateway.ActionAck, ""); err != nil && !(errors.As(err, &ae) && (ae.Code == gateway.CodeNotAttention || ae.Code == gateway.CodePermission)) {
				return err
			}
		}
		return nil
	case attention.Deferred:
		return act(gateway.ActionDefer, "")
	case attention.Responded:
		return act(gateway.ActionResolve, "")
	case attention.Claimed:
		return act(gateway.ActionClaim, "")
	case attention.Failed:
		return s.opts.Backend.Notify(s.ctx, s.opts.Agent, d.Group, d.EventID, "harness_failed", "the harness could not process the event: "+res.Note)
	}
	return nil // ignored, superseded: the delivery cursor says it all
}

func (s *session) action(method string, raw json.RawMessage) (any, *Error) {
	var p ActionParams
	if e := decodeParams(raw, &p); e != nil {
		return nil, e
	}
	if p.EventID == "" {
		return nil, rpcErr(CodeInvalidParams, "%s needs eventId", method)
	}
	a := gateway.Action(strings.TrimPrefix(method, "chat/"))
	switch {
	case a == gateway.ActionReact && p.Signal == "":
		return nil, rpcErr(CodeInvalidParams, "chat/react needs signal (seen, agree, working, queued, claimed, done, declined, blocked, unclear)")
	case a == gateway.ActionDefer && strings.TrimSpace(p.Note) == "":
		return nil, rpcErr(CodeInvalidParams, "chat/defer needs note: the reason")
	}
	var group string
	if pd, ok := s.pending[p.EventID]; ok {
		group = pd.d.Group
	} else {
		d, ok, err := c2a.FindDelivery(s.ctx, s.opts.Backend, s.opts.Agent, p.Group, p.EventID)
		if err != nil {
			return nil, rpcErr(CodeInternal, "%v", err)
		}
		if !ok {
			return nil, rpcErr(CodeInvalidParams, "event %q was never delivered to %s", p.EventID, s.opts.Agent)
		}
		group = d.Group
	}
	res, err := s.opts.Backend.Act(s.ctx, gateway.ActionRequest{Action: a, Group: group, EventID: p.EventID,
		Actor: s.opts.Agent, Signal: p.Signal, Note: p.Note})
	var ae *gateway.ActionError
	switch {
	case errors.As(err, &ae):
		e := rpcErr(CodeInvalidParams, "%s", ae.Reason)
		switch ae.Code {
		case gateway.CodeConflict:
			e.Code = CodeConflict
			if ae.Claim != nil {
				e.Data["claimedBy"] = ae.Claim.Actor
			}
		case gateway.CodePermission:
			e.Code = CodePermissionDenied
		}
		e.Data["code"] = ae.Code
		return nil, e
	case err != nil:
		return nil, rpcErr(CodeInternal, "%v", err)
	}
	return res, nil
}

func (s *session) onNotification(m Message) {
	switch m.Method {
	case "notifications/initialized":
	case "notifications/progress":
		s.log.Debug("harness progress", "params", len(m.Params))
	case "notifications/cancelled":
		s.log.Info("harness cancelled a request")
	default:
		s.log.Debug("unknown notification ignored", "method", m.Method)
	}
}

func (s *session) heartbeat() error {
	if len(s.pings) >= missedPings {
		return fmt.Errorf("%w (%d unanswered)", ErrHeartbeat, len(s.pings))
	}
	s.pingSeq++
	id := fmt.Sprintf("ping-%d", s.pingSeq)
	s.pings[id] = true
	raw, _ := json.Marshal(id)
	return s.send(Message{ID: raw, Method: "ping"})
}

// validID reports whether id, as the message has it, is a JSON-RPC id:
// absent, null, a string or a number.
func validID(id json.RawMessage) bool {
	t := trimSpace(id)
	if len(t) == 0 {
		return true
	}
	switch c := t[0]; {
	case c == '"', c == '-', c >= '0' && c <= '9':
		return true
	}
	return string(t) == "null"
}
