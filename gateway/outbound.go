package gateway

import (
	"container/heap"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/transports"
)

// KindDelivery records the final state of delivering one envelope to one
// receiver over its transport: data.state "delivered" or "failed"
// (ledger.KindDelivery).
const KindDelivery = ledger.KindDelivery

// OutboundOptions configure the outbound dispatcher. Nil means defaults.
type OutboundOptions struct {
	// Senders maps a transport name ("http", "mail", "folder",
	// "clipboard") to the Sender that delivers over it.
	Senders map[string]transports.Sender
	// MinBackoff and MaxBackoff bound the delay between attempts: it
	// starts at MinBackoff (1 s) and doubles up to MaxBackoff (16 s), then
	// stays there (docs/design.md §5.5).
	MinBackoff, MaxBackoff time.Duration
	// MaxAttempts is how many attempts are made before the delivery fails
	// for good (DefaultMaxAttempts when zero).
	MaxAttempts int
	// AttemptTimeout bounds one Send (30 s when zero); a delivery whose
	// attempts all time out fails with E-TIMEOUT, others with E-ROUTE.
	AttemptTimeout time.Duration
	// Workers is how many sends run at once per transport (4 when zero);
	// one receiver gets at most half of them (at least one).
	Workers int
	// HorizonEvery is how often the dispatch horizon is saved in the
	// ledger when it has moved (5 s when zero); it is saved once more
	// when the dispatcher stops. A restart reads the ledger from there,
	// and after a crash re-reads at most what came after the last save
	// (docs/design.md §5.1).
	HorizonEvery time.Duration
}

// DefaultMaxAttempts is the default number of delivery attempts.
const DefaultMaxAttempts = 10

// delivery is one envelope to one receiver.
type delivery struct {
	key       string // event id + ":" + receiver actor
	event     ledger.Event
	group     string
	sender    string // sender actor, where an error goes back
	receiver  string
	transport string
	address   string
	messageID string
	text      []byte
	attempts  int
	due       time.Time
	timeouts  int
	lastErr   error
	index     int // in the heap

	// final is the state ("delivered", "failed") whose record the ledger
	// refused: only the record is tried again, nothing is sent.
	final       string
	cause       error
	recordTries int
	bounced     bool

	// after is the event the follower passed just before the message:
	// while the delivery is pending, the horizon stays at or before it.
	after ledger.Mark
}

type dueHeap []*delivery

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i]; h[i].index = i; h[j].index = j }
func (h *dueHeap) Push(x any)        { d := x.(*delivery); d.index = len(*h); *h = append(*h, d) }
func (h *dueHeap) Pop() any {
	old := *h
	d := old[len(old)-1]
	*h = old[:len(old)-1]
	return d
}

// outbound is the dispatcher's state.
type outbound struct {
	r    *Relay
	opts OutboundOptions
	log  *slog.Logger

	mu      sync.Mutex
	queue   dueHeap
	pending map[string]*delivery // by key: queued or in flight
	final   map[string]bool      // keys with a final delivery event the follower has not passed yet
	wake    chan struct{}
	// passed is the last event the follower has passed, and saved the
	// horizon last saved in (or read from) the ledger.
	passed, saved ledger.Mark
	// horizonName is the name of the ledger mark that holds the horizon.
	horizonName string
}

// RunOutbound delivers every recorded envelope whose receiver has a
// transport in the address book, until ctx ends. It is the durable outbox
// of docs/design.md §5.1: what is pending is derived from the ledger — a message
// event without a final x.crosstalk.delivery event for a receiver — so a
// restart resumes every unfinished delivery; it reads the ledger from the
// dispatch horizon (see horizonName), so it costs what is pending, not the
// ledger's history. Sends are at-least-once with
// the envelope's message id as idempotency key (receivers de-duplicate);
// the final record is exactly once (its dedupe key). A delivery that fails
// for good records a failed delivery event, a system.notify and an ERROR
// envelope (E-ROUTE or E-TIMEOUT) back to the sender.
func (r *Relay) RunOutbound(ctx context.Context, opts *OutboundOptions) error {
	o := &outbound{r: r, log: r.component("outbound"), pending: map[string]*delivery{}, final: map[string]bool{}, wake: make(chan struct{}, 1)}
	if opts != nil {
		o.opts = *opts
	}
	if o.opts.MinBackoff <= 0 {
		o.opts.MinBackoff = time.Second
	}
	if o.opts.MaxBackoff <= 0 {
		o.opts.MaxBackoff = 16 * time.Second
	}
	if o.opts.MaxAttempts <= 0 {
		o.opts.MaxAttempts = DefaultMaxAttempts
	}
	if o.opts.AttemptTimeout <= 0 {
		o.opts.AttemptTimeout = 30 * time.Second
	}
	if o.opts.Workers <= 0 {
		o.opts.Workers = 4
	}
	if o.opts.HorizonEvery <= 0 {
		o.opts.HorizonEvery = 5 * time.Second
	}
	o.horizonName = r.horizonName()
	r.outbound.Store(o)
	routed := false
	for _, a := range r.book.Agents() {
		routed = routed || a.Transport != ""
	}
	if !routed {
		// No agent has a transport: everything is read through the API,
		// and there is nothing to follow.
		<-ctx.Done()
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	// Each transport has its own Workers slots, so a hung receiver on one
	// medium (an HTTP endpoint that never answers) cannot hold up
	// deliveries on another; and one receiver takes at most half of its
	// medium's slots, so it cannot hold up the other receivers on the
	// same medium either. A receiver's slot is taken first: a send
	// waiting for it holds no slot of the medium. A delivery waiting for
	// its receiver's slot waits in the receiver's lane, not in a goroutine
	// of its own: a receiver that hangs for weeks gathers every envelope
	// sent to it meanwhile, and the goroutines that hold its slots take
	// them in order.
	mediums := map[string]chan struct{}{}
	perReceiver := max(o.opts.Workers/2, 1)
	type lane struct {
		busy    int // goroutines holding one of the receiver's slots
		waiting []*delivery
	}
	var lanesMu sync.Mutex
	lanes := map[string]*lane{}
	dispatch := func(d *delivery) {
		tsem, ok := mediums[d.transport]
		if !ok {
			tsem = make(chan struct{}, o.opts.Workers)
			mediums[d.transport] = tsem
		}
		key := d.transport + "\x00" + d.address
		lanesMu.Lock()
		l, ok := lanes[key]
		if !ok {
			l = &lane{}
			lanes[key] = l
		}
		if l.busy >= perReceiver {
			l.waiting = append(l.waiting, d)
			lanesMu.Unlock()
			return
		}
		l.busy++
		lanesMu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d != nil {
				select {
				case tsem <- struct{}{}:
				case <-ctx.Done():
					return
				}
				o.attempt(ctx, d)
				<-tsem
				lanesMu.Lock()
				d = nil
				if len(l.waiting) > 0 {
					d, l.waiting[0] = l.waiting[0], nil
					l.waiting = l.waiting[1:]
				} else {
					l.busy--
					if l.busy == 0 {
						delete(lanes, key) // a year of addresses
					}
				}
				lanesMu.Unlock()
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		o.followAll(ctx)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(o.opts.HorizonEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := o.saveHorizon(ctx); err != nil && ctx.Err() == nil {
					o.log.Warn("saving the dispatch horizon; trying again later", "err", err)
				}
			}
		}
	}()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	// Once every send and the follower have stopped, the horizon as it
	// stands is saved: a stop loses no progress (up to HorizonEvery of
	// it), so the next start reads no more than it must. What stopped
	// mid-send or mid-record is still pending, so the horizon stays
	// before it. The save is bounded: a ledger that does not answer must
	// not hold up a shutdown.
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), horizonStopTimeout)
		defer cancel()
		if err := o.saveHorizon(sctx); err != nil {
			o.log.Warn("saving the dispatch horizon at stop; the next start reads the ledger from the one saved before", "err", err)
		}
	}()
	defer wg.Wait()
	defer cancel()
	for {
		o.mu.Lock()
		var next *delivery
		if len(o.queue) > 0 && !o.queue[0].due.After(r.now()) {
			next = heap.Pop(&o.queue).(*delivery)
		}
		wait := time.Hour
		if next == nil && len(o.queue) > 0 {
			wait = o.queue[0].due.Sub(r.now())
		}
		o.mu.Unlock()
		if next != nil {
			dispatch(next)
			continue
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return nil
		case <-o.wake:
		case <-timer.C:
		}
	}
}

// followAll reads the ledger's log from the dispatch horizon and then
// live, queueing deliveries and dropping those that have their final
// record: one follower whatever the number of groups (a follower per
// group kept a goroutine, and a poll of the ledger every FollowPoll, for
// every group the relay ever saw). When the ledger fails, it follows
// again after a pause, from the position it had passed: what it queued
// is still pending, and reading it again would queue what has been
// delivered since.
//
// The final records already stored after the horizon are read first:
// each lies after its message, so queueing a message as soon as it is
// read would send it again before its record is reached — every
// delivered envelope went out again at every restart.
func (o *outbound) followAll(ctx context.Context) {
	started := false
	for {
		if !started {
			err := o.start(ctx)
			if err != nil && ctx.Err() == nil {
				o.log.Error("reading the dispatch horizon and the delivery records after it; trying again", "err", err)
			}
			started = err == nil
		}
		if started {
			o.followLog(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// The dispatch horizon is a position P of the ledger's log such that
// every message event at or before P has a final record of each of its
// deliveries (or needs none): a restart follows the log from P, not from
// its start, and so costs what is pending, not the ledger's history.
// The follower moves it: it is the event before the oldest message with
// a delivery still pending (queued, waiting for its receiver, in flight,
// in backoff, or its record being tried again), or while nothing is
// pending the last event the follower passed. It is saved every
// HorizonEvery and when the dispatcher stops, after the records it relies
// on are durable, so a crash
// loses at most the last moves: the restart reads more, sends nothing
// twice (the records are read first) and skips nothing.
//
// A delivery record lies after its message in the log: both are in the
// message's group, whose events are numbered in the order they are
// appended, and the dispatcher writes the record only after it read the
// message from the log. So the records that matter to the messages after
// P — those not to queue — all lie after P, and the prefill reads the log
// after P only.
//
// The horizon holds for the routes it was made with: which agents have
// a transport, their names and roles decide a message's deliveries. Its
// mark's name holds a digest of them, so a relay whose address book
// routes differently (or another relay with another book on a shared
// JetStream ledger) starts from the beginning of the log once, as every
// start did before there was a horizon: a newly routed agent still gets
// every envelope without a record.

// horizonName is the name of the ledger mark holding the dispatch
// horizon of the relay's address book: its name and a digest of the
// agents' ids, names, roles and whether they have a transport.
func (r *Relay) horizonName() string {
	var lines []string
	for _, a := range r.book.Agents() {
		lines = append(lines, fmt.Sprintf("%q %q %q %t", a.ID, a.Names, a.Roles, a.Transport != ""))
	}
	slices.Sort(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return "outbound horizon " + strings.ToLower(r.name) + " " + hex.EncodeToString(sum[:8])
}

// start reads the dispatch horizon and marks final every delivery
// recorded after it.
func (o *outbound) start(ctx context.Context) error {
	h, err := o.loadHorizon(ctx)
	if err != nil {
		return err
	}
	if h.Pos == 0 {
		err = o.prefillGroups(ctx)
	} else {
		err = o.prefillLog(ctx, h.Pos)
	}
	if err != nil {
		return err
	}
	o.mu.Lock()
	o.passed, o.saved = h, h
	o.mu.Unlock()
	return nil
}

// loadHorizon returns the saved dispatch horizon: none (position 0) in a
// ledger that has none (written before there was one), and none when the
// ledger no longer holds the recorded event at the recorded position (a
// ledger restored or imported anew numbers its log otherwise).
func (o *outbound) loadHorizon(ctx context.Context) (ledger.Mark, error) {
	m, err := o.r.store.GetMark(ctx, o.horizonName)
	if errors.Is(err, ledger.ErrNotFound) {
		return ledger.Mark{}, nil
	}
	if err != nil {
		return ledger.Mark{}, fmt.Errorf("reading the dispatch horizon: %w", err)
	}
	if m.Pos <= 0 {
		return ledger.Mark{}, nil
	}
	ls, err := o.r.store.Log(ctx, m.Pos-1, 1)
	if err != nil {
		return ledger.Mark{}, fmt.Errorf("checking the dispatch horizon: %w", err)
	}
	if len(ls) == 0 || ls[0].Pos != m.Pos || ls[0].ID != m.EventID {
		o.log.Warn("the ledger does not hold the dispatch horizon's event at its position (restored or imported anew?); reading it from the start", "position", m.Pos, "event", m.EventID)
		return ledger.Mark{}, nil
	}
	return m, nil
}

// horizon returns the dispatch horizon as it stands.
func (o *outbound) horizon() ledger.Mark {
	o.mu.Lock()
	defer o.mu.Unlock()
	h := o.passed
	for _, d := range o.pending {
		if d.after.Pos < h.Pos {
			h = d.after
		}
	}
	return h
}

// horizonStopTimeout bounds the save of the dispatch horizon when the
// dispatcher stops.
const horizonStopTimeout = 2 * time.Second

// saveHorizon saves the dispatch horizon in the ledger if it has moved.
func (o *outbound) saveHorizon(ctx context.Context) error {
	h := o.horizon()
	o.mu.Lock()
	moved := h.Pos > o.saved.Pos
	o.mu.Unlock()
	if !moved {
		return nil
	}
	if err := o.r.store.SetMark(ctx, o.horizonName, h); err != nil {
		return fmt.Errorf("saving the dispatch horizon at position %d: %w", h.Pos, err)
	}
	o.mu.Lock()
	o.saved = h
	o.mu.Unlock()
	return nil
}

// prefillGroups marks final every delivery recorded in the ledger, read
// group by group: without a horizon, every record may matter.
func (o *outbound) prefillGroups(ctx context.Context) error {
	gs, err := o.r.Groups(ctx)
	if err != nil {
		return fmt.Errorf("listing groups: %w", err)
	}
	for _, g := range gs {
		var since int64
		for {
			evs, err := o.r.store.Range(ctx, g.ID, since, []string{KindDelivery}, 1000)
			if err != nil {
				return fmt.Errorf("group %q: %w", g.ID, err)
			}
			if len(evs) == 0 {
				break
			}
			for _, ev := range evs {
				since = ev.Seq
				if d, err := ParseData(ev); err == nil {
					o.markFinal(d.EventID + ":" + d.ActorID)
				}
			}
		}
	}
	return nil
}

// prefillLog marks final every delivery recorded in the log after
// position after, the horizon: the records before it are of messages
// before it, which are not read again.
func (o *outbound) prefillLog(ctx context.Context, after int64) error {
	const page = 1000
	for {
		ls, err := o.r.store.Log(ctx, after, page)
		if err != nil {
			return fmt.Errorf("reading the delivery records after position %d: %w", after, err)
		}
		for _, l := range ls {
			after = l.Pos
			if l.Kind != KindDelivery {
				continue
			}
			if d, err := ParseData(l.Event); err == nil {
				o.markFinal(d.EventID + ":" + d.ActorID)
			}
		}
		if len(ls) < page {
			return nil
		}
	}
}

// followLog follows the log after the position the follower has passed
// until ctx ends or the ledger fails.
func (o *outbound) followLog(ctx context.Context) {
	o.mu.Lock()
	prev := o.passed
	o.mu.Unlock()
	for l, err := range o.r.store.FollowLog(ctx, prev.Pos) {
		if err != nil {
			if ctx.Err() == nil {
				o.log.Error("following the ledger; following it again from where it stopped", "after_position", prev.Pos, "err", err)
			}
			return
		}
		switch ev := l.Event; ev.Kind {
		case KindDelivery:
			// The record lies after its message, which this loop has
			// passed: nothing will queue the delivery again.
			d, err := ParseData(ev)
			if err == nil {
				o.settle(d.EventID + ":" + d.ActorID)
			}
		case KindMessage:
			for _, d := range o.plan(ev) {
				d.after = prev
				o.enqueue(d)
			}
		}
		// After the message's deliveries are pending: the horizon never
		// passes a message whose deliveries are not yet queued.
		prev = ledger.Mark{Pos: l.Pos, EventID: l.ID}
		o.mu.Lock()
		o.passed = prev
		o.mu.Unlock()
	}
}

// markFinal notes a delivery recorded as final before the follower
// reaches its message, so that the message is not queued.
func (o *outbound) markFinal(key string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.final[key] = true
	o.dropLocked(key)
}

// settle forgets a delivery whose record is written, once its message
// can no longer be queued: a year of deliveries must not stay in memory.
func (o *outbound) settle(key string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.final, key)
	o.dropLocked(key)
}

// dropLocked removes the delivery key from the queue and the pending.
func (o *outbound) dropLocked(key string) {
	if d, ok := o.pending[key]; ok {
		if d.index >= 0 && d.index < len(o.queue) && o.queue[d.index] == d {
			heap.Remove(&o.queue, d.index)
		}
		delete(o.pending, key)
	}
}

func (o *outbound) enqueue(d *delivery) {
	o.mu.Lock()
	if o.final[d.key] || o.pending[d.key] != nil {
		o.mu.Unlock()
		return
	}
	d.due = o.r.now()
	o.pending[d.key] = d
	heap.Push(&o.queue, d)
	o.mu.Unlock()
	o.observe(d, DeliveryQueued)
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// known reports whether the delivery key is recorded final or pending.
func (o *outbound) known(key string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.final[key] || o.pending[key] != nil
}

// plan returns the deliveries a message event needs: one per receiver
// actor that has a transport, never back to the sender.
func (o *outbound) plan(ev ledger.Event) []*delivery {
	d, err := ParseData(ev)
	if err != nil || d.X == nil || d.X.Envelope == nil {
		return nil
	}
	var targets []Agent
	book := o.r.book
	if len(d.To) == 0 || slices.Contains(d.To, "@all") {
		targets = book.Agents()
	} else {
		for _, t := range d.To {
			if strings.HasPrefix(t, "@") {
				for _, a := range book.Agents() {
					for _, role := range a.Roles {
						if attention.SameActor(t[1:], role) || t == "@peers" && role == "peer" {
							targets = append(targets, a)
						}
					}
				}
				continue
			}
			if a, ok := book.Agent(t); ok {
				targets = append(targets, a)
			}
		}
	}
	var out []*delivery
	seen := map[string]bool{}
	var text []byte
	for _, a := range targets {
		if a.Transport == "" || seen[a.ID] || attention.SameActor(a.ID, d.X.Sender) {
			continue
		}
		seen[a.ID] = true
		if o.known(ev.ID + ":" + a.ID) {
			continue // recorded or queued: no text to make
		}
		if text == nil {
			text = o.r.outboundText(d.X)
		}
		out = append(out, &delivery{
			key: ev.ID + ":" + a.ID, event: ev, group: ev.GroupID, sender: d.X.Sender, receiver: a.ID,
			transport: a.Transport, address: a.Address, messageID: d.X.Envelope.Message,
			text: textFor(a, text), index: -1,
		})
	}
	return out
}

// textFor returns the text an agent receives: text itself, or for an
// agent marked compat = "v1.0" its v1.0 form (envelope.ToV10), which v1.0
// parsers read: intents mapped back where v1.0 has them and kept where it
// does not (v1.0 parsers do not check them), META blocks dropped (v1.0
// parsers ignore them), a session added, and a signature replaced by
// "sig: none" because the rewrite would break it; the relay verified it
// at intake (docs/format.md "Writing for v1.0 readers").
func textFor(a Agent, text []byte) []byte {
	if a.Compat != CompatV10 {
		return text
	}
	env, err := envelope.Unmarshal(text)
	if err != nil {
		return text
	}
	v10, err := envelope.ToV10(env, envelope.V10Options{DropMeta: true, KeepIntents: true})
	if err != nil {
		return text
	}
	b, err := envelope.MarshalV10(v10)
	if err != nil {
		return text
	}
	return b
}

// outboundText is the text sent onward: a signed envelope exactly as
// received (its signed lines must not change, docs/design.md §4.2); an unsigned
// one with this relay appended to its X-Route hops.
func (r *Relay) outboundText(x *XCrosstalk) []byte {
	env, err := envelope.Unmarshal([]byte(x.Raw))
	if err != nil || env.Signed() {
		return []byte(x.Raw)
	}
	hop := "relay://" + strings.ToLower(r.name)
	for i := range env.Meta {
		if env.Meta[i].Namespace != "routing" {
			continue
		}
		for j, f := range env.Meta[i].Fields {
			if f.Key == "X-Route" {
				env.Meta[i].Fields[j].Value = f.Value + " → " + hop
				return marshalOr(env, x.Raw)
			}
		}
		env.Meta[i].Fields = append(env.Meta[i].Fields, envelope.Field{Key: "X-Route", Value: env.From + " → " + hop})
		return marshalOr(env, x.Raw)
	}
	env.Meta = append(env.Meta, envelope.Meta{Namespace: "routing", Fields: []envelope.Field{{Key: "X-Route", Value: env.From + " → " + hop}}})
	return marshalOr(env, x.Raw)
}

func marshalOr(env *envelope.Envelope, raw string) []byte {
	b, err := envelope.Marshal(env)
	if err != nil {
		return []byte(raw)
	}
	return b
}

// attempt makes one delivery attempt and records or reschedules.
func (o *outbound) attempt(ctx context.Context, d *delivery) {
	if d.final != "" {
		o.finish(ctx, d, d.final, d.cause)
		return
	}
	d.attempts++
	sender, ok := o.opts.Senders[d.transport]
	var err error
	if !ok {
		err = fmt.Errorf("%w: no %q transport is configured on this relay", transports.ErrPermanent, d.transport)
	} else {
		actx, cancel := context.WithTimeout(ctx, o.opts.AttemptTimeout)
		err = sender.Send(actx, d.address, d.messageID, d.text)
		timedOut := errors.Is(actx.Err(), context.DeadlineExceeded)
		cancel()
		if ctx.Err() != nil {
			return // shutting down: the ledger still says pending
		}
		if err != nil && timedOut {
			d.timeouts++
		}
	}
	if err == nil {
		o.finish(ctx, d, "delivered", nil)
		return
	}
	d.lastErr = err
	o.log.Warn("delivery attempt failed", "event", d.event.ID, "to", d.receiver, "transport", d.transport, "attempt", d.attempts, "err", cutText(err.Error(), maxErrorText))
	if errors.Is(err, transports.ErrPermanent) || d.attempts >= o.opts.MaxAttempts {
		o.finish(ctx, d, "failed", err)
		return
	}
	o.retry(d, d.attempts)
	o.observe(d, DeliveryRetry)
}

// retry queues d again after the backoff of its n-th try.
func (o *outbound) retry(d *delivery, n int) {
	backoff := o.opts.MinBackoff << min(n-1, 30)
	if backoff > o.opts.MaxBackoff || backoff <= 0 {
		backoff = o.opts.MaxBackoff
	}
	o.mu.Lock()
	d.due = o.r.now().Add(backoff)
	if o.pending[d.key] == d {
		heap.Push(&o.queue, d)
	}
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// finish records the final state of a delivery; for a failure also the
// notice and the ERROR envelope back to the sender.
func (o *outbound) finish(ctx context.Context, d *delivery, state string, cause error) {
	data := EventData{EventID: d.event.ID, ActorID: d.receiver, State: state, Message: fmt.Sprintf("%s via %s to %s after %d attempt(s)", state, d.transport, d.address, d.attempts)}
	if cause != nil {
		data.Note = cutText(cause.Error(), maxErrorText)
	}
	recs := []ledger.Record{{Kind: KindDelivery, GroupID: d.group, By: "system", Data: mustJSON(data), DedupeKey: "delivery:" + d.key}}
	if state == "failed" {
		code := envelope.CodeRoute
		if d.timeouts == d.attempts {
			code = envelope.CodeTimeout
		}
		reason := fmt.Sprintf("could not deliver to %s via %s: %s", d.receiver, d.transport, cutText(fmt.Sprint(cause), maxErrorText))
		recs = append(recs, ledger.Record{Kind: KindNotify, GroupID: d.group, By: "system", DedupeKey: "delivery-failed:" + d.key,
			Data: mustJSON(EventData{Kind: "error", Priority: "high", Title: string(code) + " delivering " + d.messageID, Message: reason, TargetActorID: d.sender, RelatedEventID: d.event.ID, RequiresAck: true})})
		if !d.bounced {
			d.bounced = true
			o.bounce(ctx, d, code, reason)
		}
	}
	if _, err := o.r.store.Append(ctx, recs); err != nil {
		if ctx.Err() != nil {
			return // shutting down: the ledger still says pending
		}
		// The ledger refused the record: try the record again (the
		// dedupe keys make that safe), never the send.
		d.final, d.cause = state, cause
		d.recordTries++
		o.log.Error("recording delivery; trying again", "event", d.event.ID, "state", state, "err", err)
		o.retry(d, d.recordTries)
		return
	}
	o.settle(d.key) // the follower has read its message
	o.observe(d, state)
	o.log.Info("delivery "+state, "event", d.event.ID, "to", d.receiver, "transport", d.transport, "attempts", d.attempts)
}

// maxErrorText bounds the error text of a failed delivery kept in its
// record, its notice and the ERROR envelope back: the text holds what
// the receiver answered (an HTTP receiver's ERROR reason, an SMTP
// server's reply), and a record above the ledger's limit would be
// refused and tried again for ever.
const maxErrorText = 2 << 10

// cutText returns s, or its first n bytes cut at a character boundary
// and marked as cut.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + fmt.Sprintf("… (%d more bytes)", len(s)-n)
}

// bounce sends the ERROR envelope back to the sender over its own
// transport, when it has one.
func (o *outbound) bounce(ctx context.Context, d *delivery, code envelope.Code, reason string) {
	a, ok := o.r.book.Agent(d.sender)
	if !ok || a.Transport == "" {
		return
	}
	s, ok := o.opts.Senders[a.Transport]
	if !ok {
		return
	}
	orig, err := envelope.Unmarshal(d.text)
	if err != nil {
		return
	}
	e := envelope.NewError(orig, code, reason, reason)
	e.From = o.r.name
	b, err := envelope.Marshal(e)
	if err != nil {
		return
	}
	actx, cancel := context.WithTimeout(ctx, o.opts.AttemptTimeout)
	defer cancel()
	if err := s.Send(actx, a.Address, e.Message, textFor(a, b)); err != nil {
		o.log.Warn("bouncing error envelope", "to", d.sender, "err", err)
	}
}
