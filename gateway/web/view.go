package web

import (
	"fmt"
	"strings"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// maxDepth bounds the indentation of a reply chain in the thread view.
const maxDepth = 6

// item is one ledger event as the pages show it: an envelope card, or a
// one-line note for bookkeeping (acks, claims, dispositions).
type item struct {
	Seq     int64
	EventID string
	Group   string
	Kind    string
	// Card is set for an event made from an envelope (or a rejected
	// input); a note otherwise.
	Card     bool
	From, To string
	Intent   string
	TS       string // the ledger's timestamp, RFC 3339
	Time     string // the same for people: "2006-01-02 15:04:05Z"
	// Status is the verification status (docs/design.md §4.3), StatusClass its
	// colour: ok, warn, bad or plain.
	Status, StatusClass string
	Message, Thread     string
	Parent              string // the parent message id
	ParentSeq           int64  // the parent's seq in this group, 0 if unknown
	ParentFrom          string
	Depth               int
	Meta                []envelope.Meta
	Body                string
	Attention           bool // CCCS priority "attention": needs an ack
	Transport           string
	Warnings            []string
	Rejected            string // why the relay refused it; "" when accepted
	Note                string // the text of a note
	// Copy is the envelope to paste into a chat: the raw text of a signed
	// envelope (never re-serialized, docs/design.md §4.2), the canonical form of an
	// unsigned one; CopyFenced the same in a ``` fence (docs/design.md §3.2).
	Copy, CopyFenced string
	// Protocol is the HANDOFF or BLOCKED the message is (BeadBoard §6.3
	// labels), Src where a forwarded message came from (CCCS §9.1).
	Protocol *gateway.Protocol
	Src      gateway.Provenance
}

// Anchor is the element id of the item.
func (it item) Anchor() string { return fmt.Sprintf("e%d", it.Seq) }

// statusClass maps a verification status to its badge colour.
func statusClass(status string) string {
	switch status {
	case gateway.StatusVerified:
		return "ok"
	case gateway.StatusFirstUse:
		return "warn"
	case gateway.StatusUnsigned, "":
		return "plain"
	}
	return "bad" // key-changed, bad-signature, unknown-key, revoked
}

// humanTime formats a ledger timestamp for people.
func humanTime(ts string) string {
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return ts
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// fenced wraps text in a ``` fence longer than any backtick run in it, as
// envelope.Writer does with Fence set.
func fenced(text string) string {
	best, n := 0, 0
	for i := 0; i < len(text); i++ {
		if text[i] == '`' {
			n++
			best = max(best, n)
		} else {
			n = 0
		}
	}
	f := strings.Repeat("`", max(3, best+1))
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	return f + "\n" + text + f + "\n"
}

// copyText returns the text to copy for an envelope: the raw text of a
// signed one, else its canonical form (the raw text if it cannot be
// written).
func copyText(env *envelope.Envelope, raw string) string {
	if env == nil {
		return raw
	}
	if env.Signed() && raw != "" {
		return raw
	}
	b, err := envelope.Marshal(env)
	if err != nil {
		return raw
	}
	return string(b)
}

// timeline turns a group's events, in seq order, into items. It remembers
// what it has seen so that replies find their parents, and notes the
// events they are about.
type timeline struct {
	msgSeq   map[string]int64  // message id → seq
	msgFrom  map[string]string // message id → sender
	msgDepth map[string]int    // message id → depth in its thread
	evSeq    map[string]int64  // event id → seq
	evThread map[string]string // event id → thread

	// keep, when not zero, is how many of the latest events are
	// remembered (seen, oldest first, as a ring from next).
	keep int
	seen []seenEvent
	next int
}

// seenEvent is what a timeline remembers of one event, to forget it.
type seenEvent struct{ id, message string }

func newTimeline() *timeline {
	return &timeline{msgSeq: map[string]int64{}, msgFrom: map[string]string{}, msgDepth: map[string]int{}, evSeq: map[string]int64{}, evThread: map[string]string{}}
}

// liveTimelineEvents is how many of the latest events a page stream's
// timeline remembers: several times what a page reads before its first
// item (contextEvents), so a live reply finds its parent at least as far
// back as a reloaded page would.
const liveTimelineEvents = 5 * contextEvents

// newLiveTimeline returns the timeline of a page stream, which may stay
// open for months on a busy group: it forgets all but the latest
// liveTimelineEvents events.
func newLiveTimeline() *timeline {
	t := newTimeline()
	t.keep = liveTimelineEvents
	return t
}

// remember notes an event (and the message it recorded, if any) and,
// past keep, forgets the oldest.
func (t *timeline) remember(id, message string) {
	if t.keep == 0 {
		return
	}
	e := seenEvent{id: id, message: message}
	if len(t.seen) < t.keep {
		t.seen = append(t.seen, e)
		return
	}
	old := t.seen[t.next]
	t.seen[t.next] = e
	t.next = (t.next + 1) % t.keep
	delete(t.evSeq, old.id)
	delete(t.evThread, old.id)
	if old.message != "" {
		delete(t.msgSeq, old.message)
		delete(t.msgFrom, old.message)
		delete(t.msgDepth, old.message)
	}
}

// add returns the item of ev, and false for events the pages do not show
// (read cursors, outbound bookkeeping, undecodable data).
func (t *timeline) add(ev ledger.Event) (item, bool) {
	d, err := gateway.ParseData(ev)
	if err != nil {
		return item{}, false
	}
	t.evSeq[ev.ID] = ev.Seq
	it := item{Seq: ev.Seq, EventID: ev.ID, Group: ev.GroupID, Kind: ev.Kind, TS: ev.TS, Time: humanTime(ev.TS)}
	if x := d.X; x != nil && (x.Envelope != nil || ev.Kind == gateway.KindNotify) {
		it.Card = true
		it.Transport = x.Transport
		it.Status, it.StatusClass = x.Verification, statusClass(x.Verification)
		it.Warnings = x.Warnings
		if ev.Kind == gateway.KindNotify && d.Kind == "error" && strings.HasPrefix(d.Title, "rejected") {
			it.Rejected = d.Message
		}
		if env := x.Envelope; env != nil {
			it.From, it.To, it.Intent = env.From, env.To, env.Intent
			it.Message, it.Thread, it.Parent = env.Message, env.Thread, env.Parent
			it.Meta, it.Body = env.Meta, env.Body
			it.Copy = copyText(env, x.Raw)
			it.CopyFenced = fenced(it.Copy)
			if it.Status == "" {
				it.Status, it.StatusClass = "unchecked", "plain"
			}
		} else {
			it.From, it.Intent, it.Body = "relay", "ERROR", d.Message
			it.Status, it.StatusClass = "", ""
		}
		it.Attention = d.Priority == "attention"
		it.Protocol, it.Src = d.Protocol, d.Provenance
		if it.Parent != "" {
			if seq, ok := t.msgSeq[it.Parent]; ok {
				it.ParentSeq, it.ParentFrom = seq, t.msgFrom[it.Parent]
				it.Depth = min(maxDepth, t.msgDepth[it.Parent]+1)
			}
		}
		recorded := ""
		if it.Message != "" && it.Rejected == "" {
			if _, dup := t.msgSeq[it.Message]; !dup {
				t.msgSeq[it.Message], t.msgFrom[it.Message], t.msgDepth[it.Message] = ev.Seq, it.From, it.Depth
				recorded = it.Message
			}
		}
		t.evThread[ev.ID] = it.Thread
		t.remember(ev.ID, recorded)
		return it, true
	}
	// Notes: actions taken through the API, MCP or these pages.
	t.remember(ev.ID, "")
	target := d.EventID
	ref := "an earlier event"
	if seq, ok := t.evSeq[target]; ok {
		ref = fmt.Sprintf("#%d", seq)
		it.Thread = t.evThread[target]
		it.ParentSeq = seq
	}
	who := d.ActorID
	if who == "" {
		who = ev.By
	}
	who = envelope.ShowInvisible(who) // a name recorded before the identifier rule
	switch ev.Kind {
	case gateway.KindAck:
		it.Note = who + " acknowledged " + ref
	case gateway.KindReaction:
		it.Note = strings.TrimSpace(who + " reacted " + d.Emoji + " " + d.Signal + " to " + ref)
	case gateway.KindClaim:
		it.Note = who + " claimed " + ref
		if d.ExpiresAt != "" {
			it.Note += " until " + humanTime(d.ExpiresAt)
		}
	case gateway.KindDisposition:
		it.Note = who + " marked " + ref + " " + d.Disposition
		if d.Note != "" {
			it.Note += ": " + d.Note
		}
	case gateway.KindNotify:
		it.Note = "relay: " + strings.TrimSpace(d.Title+" "+d.Message)
		if d.RelatedEventID != "" {
			if seq, ok := t.evSeq[d.RelatedEventID]; ok {
				it.Thread, it.ParentSeq = t.evThread[d.RelatedEventID], seq
			}
		}
	case gateway.KindNotifyAck:
		it.Note = who + " acknowledged a relay notice"
	default:
		return item{}, false // chat.read, x.crosstalk.delivery, unknown kinds
	}
	return it, true
}
