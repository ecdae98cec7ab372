package gateway

import (
	"cmp"
	"context"
	"iter"
	"strings"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/attention"
)

// Buffered and digest injection (C2A "Injection Modes"; docs/agents.md,
// "Buffered and digest delivery"). For an agent whose address book entry
// sets Buffer, consecutive buffered deliveries from one sender in one
// thread reach it as one merged delivery; for an agent that sets
// DigestEvery, its digest deliveries (ambient BROADCAST traffic) are left
// out and a digest event (KindDigest, see digest.go) summarises them.
// Both apply to every view of the agent's deliveries: its streams
// (FollowAgent, FollowDeliveries: SSE, WebSocket) and its lists
// (Deliveries, DeliveriesFrom: MCP, inbox). An event with an obligation
// or a must_respond policy is never merged away from its own id nor
// digested.

// Fragment is one event of a merged (buffered) delivery.
type Fragment struct {
	EventID   string           `json:"event_id"`
	Seq       int64            `json:"seq"`
	Position  int64            `json:"position,omitempty"`
	MessageID string           `json:"message,omitempty"`
	TS        string           `json:"ts"`
	Policy    attention.Policy `json:"policy"`
	Content   string           `json:"content,omitempty"`
}

// injectPoll bounds how long a stream holding a batch, or the digest
// loop, sleeps before it reads the clock again: a clock that jumps (a
// settable test clock, a stepped system clock) is noticed within it.
const injectPoll = time.Second

// progress is the marker the raw followers yield for a silent event:
// how far the stream has read, for inject, which never yields it.
func progress(group string, seq, pos int64) Delivery {
	return Delivery{Delivery: attention.Delivery{Group: group, Seq: seq, Injection: attention.Silent}, Position: pos}
}

func isProgress(d Delivery) bool { return d.Injection == attention.Silent }

// injector is one agent's injection settings.
type injector struct {
	buf    *attention.Buffer // nil: no merging
	digest bool              // digest deliveries are summarised
}

// injectorOf returns agent's settings from the address book.
func (r *Relay) injectorOf(agent string) injector {
	a, ok := r.book.Agent(agent)
	if !ok {
		return injector{}
	}
	return injector{buf: a.Buffer, digest: a.DigestEvery > 0}
}

func (c injector) off() bool { return c.buf == nil && !c.digest }

// digested reports whether d is left to the agent's digest: an ambient
// delivery with injection digest, never a must_respond one nor one with
// an obligation.
func (c injector) digested(d Delivery) bool {
	return c.digest && d.Kind != KindDigest && d.Injection == attention.Digest &&
		d.Policy != attention.MustRespond && d.Obligation == nil
}

// buffers reports whether d may be merged with its neighbours.
func (c injector) buffers(d Delivery) bool {
	return c.buf != nil && d.Kind == KindMessage && d.Injection == attention.Buffered && d.Obligation == nil
}

func (c injector) windows() (quiet, maxw time.Duration) {
	quiet, maxw = c.buf.Quiet, c.buf.MaxWindow
	if quiet <= 0 {
		quiet = attention.DefaultQuiet
	}
	if maxw <= 0 {
		maxw = attention.DefaultMaxWindow
	}
	return quiet, maxw
}

// deliveredAt is d's ledger time; the zero time when unreadable.
func deliveredAt(d Delivery) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, d.TS)
	return t
}

// joins reports whether d continues run (non-empty): same group, thread
// and sender, less than the quiet window after run's last fragment and
// less than the whole window after its first (by ledger time, so that
// every stream and list merges the same way).
func (c injector) joins(run []Delivery, d Delivery) bool {
	first, last := run[0], run[len(run)-1]
	if d.Group != last.Group || d.Thread != last.Thread || !attention.SameActor(d.From, last.From) {
		return false
	}
	quiet, maxw := c.windows()
	at := deliveredAt(d)
	return at.Sub(deliveredAt(last)) < quiet && at.Sub(deliveredAt(first)) < maxw
}

// due is when run is delivered if nothing joins it.
func (c injector) due(run []Delivery) time.Time {
	quiet, maxw := c.windows()
	due := deliveredAt(run[len(run)-1]).Add(quiet)
	if end := deliveredAt(run[0]).Add(maxw); end.Before(due) {
		return end
	}
	return due
}

// policyRank orders policies by what they ask of the agent.
var policyRank = map[attention.Policy]int{attention.MustRespond: 3, attention.AckOnly: 2, attention.MayRespond: 1}

// merge makes one delivery of run: its last fragment's, so that its
// EventID, Seq and Position are where the agent's cursor moves once it
// is delivered, with the contents of all joined by a blank line, the
// policy (and reason, deadline) of the one that asks most, and every
// fragment listed. A run of one is returned as it is.
func merge(run []Delivery) Delivery {
	if len(run) == 1 {
		return run[0]
	}
	out := run[len(run)-1]
	strongest := out
	texts := make([]string, 0, len(run))
	out.Fragments = make([]Fragment, 0, len(run))
	for _, d := range run {
		out.Fragments = append(out.Fragments, Fragment{EventID: d.EventID, Seq: d.Seq, Position: d.Position,
			MessageID: d.MessageID, TS: d.TS, Policy: d.Policy, Content: d.Content})
		texts = append(texts, d.Content)
		if policyRank[d.Policy] > policyRank[strongest.Policy] {
			strongest = d
		}
		out.Acked = out.Acked && d.Acked
		out.Responded = out.Responded && d.Responded
	}
	out.Policy, out.Reason, out.Deadline, out.Expired = strongest.Policy, strongest.Reason, strongest.Deadline, strongest.Expired
	out.Priority = cmp.Or(strongest.Priority, out.Priority)
	out.Content = strings.Join(texts, "\n\n")
	return out
}

// apply is the injection of a list of deliveries in delivery order:
// digested ones left out, runs of buffered ones merged.
func (c injector) apply(ds []Delivery) []Delivery {
	if c.off() {
		return ds
	}
	out := make([]Delivery, 0, len(ds))
	var run []Delivery
	for _, d := range ds {
		switch {
		case c.digested(d):
			continue // not delivered: does not break a run
		case c.buffers(d) && len(run) > 0 && c.joins(run, d):
			run = append(run, d)
			continue
		}
		if len(run) > 0 {
			out = append(out, merge(run))
			run = nil
		}
		if c.buffers(d) {
			run = []Delivery{d}
			continue
		}
		out = append(out, d)
	}
	if len(run) > 0 {
		out = append(out, merge(run))
	}
	return out
}

// inject applies agent's injection to the stream follow(ctx) yields
// (deliveries and, for silent events, progress markers, which it drops).
// Without buffering it only leaves digested deliveries out. With it, a
// buffered delivery is held until the run it starts ends: when a
// delivery that does not join it comes (the run is delivered first, so
// deliveries keep their order: an urgent follow-up, which is never
// buffered, flushes), or when the clock has passed its due time and the
// stream has read all the ledger holds (ahead reports whether the ledger
// has events after the last one read: a replay of stored events merges
// as a list does, whatever the speed of the reader). A held run was never
// yielded, so a stream that ends loses nothing: the agent's resume point
// (the last Position or Seq it received) is before it, and the next
// stream yields it again.
func (r *Relay) inject(ctx context.Context, agent string, follow func(context.Context) iter.Seq2[Delivery, error],
	ahead func(context.Context, Delivery) (bool, error)) iter.Seq2[Delivery, error] {
	c := r.injectorOf(agent)
	if c.buf == nil {
		return func(yield func(Delivery, error) bool) {
			for d, err := range follow(ctx) {
				if err == nil && (isProgress(d) || c.digested(d)) {
					continue
				}
				if !yield(d, err) {
					return
				}
			}
		}
	}
	return func(yield func(Delivery, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		type item struct {
			d   Delivery
			err error
		}
		ch := make(chan item, 16)
		go func() {
			defer close(ch)
			for d, err := range follow(ctx) {
				select {
				case ch <- item{d, err}:
				case <-ctx.Done():
					return
				}
				if err != nil {
					return
				}
			}
		}()
		defer func() {
			cancel()
			for range ch { // wait for the reader to end
			}
		}()
		var (
			run  []Delivery
			read Delivery // the last delivery or marker read
		)
		// take handles one item; false ends the stream.
		take := func(it item, ok bool) bool {
			if !ok {
				return false // ctx ended: the held run is yielded by the next stream
			}
			if it.err != nil {
				yield(Delivery{}, it.err)
				return false
			}
			d := it.d
			read = d
			switch {
			case isProgress(d), c.digested(d):
				return true
			case c.buffers(d) && len(run) > 0 && c.joins(run, d):
				run = append(run, d)
				return true
			}
			if len(run) > 0 {
				m := merge(run)
				run = nil
				if !yield(m, nil) {
					return false
				}
			}
			if c.buffers(d) {
				run = []Delivery{d}
				return true
			}
			return yield(d, nil)
		}
		for {
			if len(run) == 0 {
				select {
				case it, ok := <-ch:
					if !take(it, ok) {
						return
					}
				case <-ctx.Done():
					return
				}
				continue
			}
			// Something read ahead (a replay) comes first: it may join.
			select {
			case it, ok := <-ch:
				if !take(it, ok) {
					return
				}
				continue
			default:
			}
			if wait := c.due(run).Sub(r.now()); wait > 0 {
				timer := time.NewTimer(min(wait, injectPoll))
				select {
				case it, ok := <-ch:
					timer.Stop()
					if !take(it, ok) {
						return
					}
				case <-timer.C:
				case <-ctx.Done():
					timer.Stop()
					return
				}
				continue
			}
			// Due: deliver the run unless more of the ledger is still
			// to be read (it may join).
			more, err := ahead(ctx, read)
			if err == nil && more {
				select {
				case it, ok := <-ch:
					if !take(it, ok) {
						return
					}
				case <-ctx.Done():
					return
				}
				continue
			}
			m := merge(run)
			run = nil
			if !yield(m, nil) {
				return
			}
		}
	}
}
