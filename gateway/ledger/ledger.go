package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"sync"
	"time"
)

// Version is the CCCS envelope version this package writes and accepts
// (CCCS §4.2).
const Version = 1

// TimeLayout is the layout of Event.TS: RFC 3339 in UTC with millisecond
// precision, e.g. "2026-01-13T10:00:00.000Z".
const TimeLayout = "2006-01-02T15:04:05.000Z"

// Sentinel errors. Implementations wrap them, so test with errors.Is.
var (
	// ErrNotFound reports that an event, cursor or claim does not exist.
	ErrNotFound = errors.New("ledger: not found")
	// ErrClaimed reports that another actor holds an unexpired claim.
	ErrClaimed = errors.New("ledger: claimed by another actor")
	// ErrClosed reports a call on a closed Store.
	ErrClosed = errors.New("ledger: store closed")
	// ErrInvalid reports a malformed record, event or argument.
	ErrInvalid = errors.New("ledger: invalid")
	// ErrConflict reports an imported event that contradicts the ledger: an
	// id or dedupe key already present with different content, or a seq
	// that is not the next one of its group.
	ErrConflict = errors.New("ledger: conflict")
)

// Event is a CCCS v1 event (CCCS §4): the unit the ledger stores. Its JSON
// form is exactly the CCCS envelope; scope_key is always present.
type Event struct {
	// V is the envelope version, always 1.
	V int `json:"v"`
	// ID is the event's ULID, unique in the whole store.
	ID string `json:"id"`
	// TS is the append time assigned by the store, formatted with
	// TimeLayout.
	TS string `json:"ts"`
	// Seq is the event's position in its group: dense, starting at 1.
	Seq int64 `json:"seq"`
	// Kind is the event kind, e.g. "chat.message".
	Kind string `json:"kind"`
	// GroupID is the group the event belongs to.
	GroupID string `json:"group_id"`
	// ScopeKey is the opaque scope key; "" when none (CCCS §3.2).
	ScopeKey string `json:"scope_key"`
	// By is the principal the relay ascribes the event to (CCCS §5.3).
	By string `json:"by"`
	// Data is the kind-specific payload, a JSON object.
	Data json.RawMessage `json:"data"`
	// DedupeKey is the idempotency key the event was appended with, ""
	// when none. It is not part of the CCCS envelope; Export writes it as
	// "x_dedupe_key".
	DedupeKey string `json:"-"`
	// Compact tells ImportEvents that Data is already what NormalizeData
	// makes of it (Import checks that while decoding a line), sparing a
	// second pass over it; like Record.Compact. Never stored.
	Compact bool `json:"-"`
}

// Time parses TS.
func (e Event) Time() (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, e.TS)
	if err != nil {
		return time.Time{}, fmt.Errorf("ledger: event %s: bad ts: %w", e.ID, err)
	}
	return t, nil
}

// Validate checks an event given to ImportEvents: version 1, id, ts in
// RFC 3339, seq ≥ 1, kind, group and a JSON object as data.
func (e Event) Validate() error {
	_, err := e.Normalized()
	return err
}

// Normalized validates the event as Validate does and returns it with its
// data compacted by NormalizeData, in one pass over the data; data marked
// Compact is taken as it is.
func (e Event) Normalized() (Event, error) {
	switch {
	case e.V != Version:
		return e, fmt.Errorf("%w: event %q: version %d, want %d", ErrInvalid, e.ID, e.V, Version)
	case e.ID == "":
		return e, fmt.Errorf("%w: event without id", ErrInvalid)
	case e.Seq < 1:
		return e, fmt.Errorf("%w: event %s: seq %d < 1", ErrInvalid, e.ID, e.Seq)
	case e.Kind == "":
		return e, fmt.Errorf("%w: event %s: empty kind", ErrInvalid, e.ID)
	case e.GroupID == "":
		return e, fmt.Errorf("%w: event %s: empty group_id", ErrInvalid, e.ID)
	}
	if _, err := time.Parse(time.RFC3339Nano, e.TS); err != nil {
		return e, fmt.Errorf("%w: event %s: bad ts %q", ErrInvalid, e.ID, e.TS)
	}
	if e.Compact && len(e.Data) > 0 && e.Data[0] == '{' {
		return e, nil
	}
	d, err := NormalizeData(e.Data)
	if err != nil {
		return e, fmt.Errorf("event %s: %w", e.ID, err)
	}
	e.Data = d
	return e, nil
}

// Record is what a caller appends: the event fields the caller chooses.
// The store assigns V, ID, TS and Seq.
type Record struct {
	// Kind is the event kind; required.
	Kind string
	// GroupID is the group to append to; required.
	GroupID string
	// ScopeKey is the scope key, "" when none.
	ScopeKey string
	// By is the principal the event is ascribed to.
	By string
	// Data is the payload, a JSON object; nil means {}.
	Data json.RawMessage
	// DedupeKey makes the append idempotent forever: a later record with
	// the same key returns this record's event. "" means no de-duplication.
	DedupeKey string
	// Compact tells the store that Data is already what NormalizeData
	// makes of it: a compact JSON object, as json.Marshal writes a struct
	// or a map. The store then stores it as it is, sparing a second pass
	// over the data on the write path. Set it only for such output.
	Compact bool
}

// Validate checks that the record has a kind, a group and object data.
func (r Record) Validate() error {
	_, err := r.Normalized()
	return err
}

// Normalized validates the record as Validate does and returns it with
// its data compacted by NormalizeData, in one pass over the data; data
// marked Compact is taken as it is.
func (r Record) Normalized() (Record, error) {
	if r.Kind == "" {
		return r, fmt.Errorf("%w: record without kind", ErrInvalid)
	}
	if r.GroupID == "" {
		return r, fmt.Errorf("%w: record without group_id", ErrInvalid)
	}
	if r.Compact && len(r.Data) > 0 && r.Data[0] == '{' {
		return r, nil
	}
	d, err := NormalizeData(r.Data)
	if err != nil {
		return r, err
	}
	r.Data = d
	return r, nil
}

// Result is the outcome of one appended record.
type Result struct {
	// Event is the stored event: the new one, or for a duplicate the
	// event first appended with the same DedupeKey.
	Event Event
	// Duplicate reports that the DedupeKey was already present and no new
	// event was appended.
	Duplicate bool
	// Pos is the new event's position in the store's log (Store.Log),
	// when the store knows it as it appends: a store that reports it
	// numbers its log densely, each new event at the last position plus
	// one (sqlite, memory). It is 0 for a duplicate and in stores that do
	// not report it (jetstream, whose log positions are stream sequences
	// with its index messages between them).
	Pos int64
}

// Group describes one group of the ledger.
type Group struct {
	// ID is the group id.
	ID string `json:"group_id"`
	// LastSeq is the seq of the group's last event.
	LastSeq int64 `json:"last_seq"`
}

// Logged is an event and its position in the store's append order
// (Store.Log).
type Logged struct {
	// Pos is the event's position: a later event has a greater one.
	Pos int64
	Event
}

// Cursor is an actor's read watermark in a group (CCCS §6.3): the last
// event it has read, inclusive. Cursors are independent of acks.
type Cursor struct {
	// GroupID is the group.
	GroupID string `json:"group_id"`
	// Actor is the reader.
	Actor string `json:"actor_id"`
	// EventID is the last read event.
	EventID string `json:"event_id"`
	// Seq is that event's seq.
	Seq int64 `json:"seq"`
}

// Mark is a reader's durable position in the store's log (Store.Log),
// kept under a name by SetMark: the position and the id of the event
// there, so that the reader can tell a log that was replaced (restored,
// re-imported: other positions) from the one it marked. The outbound
// dispatcher keeps its dispatch horizon so (docs/design.md §5.1).
type Mark struct {
	// Pos is the log position.
	Pos int64 `json:"pos"`
	// EventID is the id of the event at Pos.
	EventID string `json:"event_id"`
}

// Claim is an actor's time-limited claim on an event (docs/design.md §5.4): while
// it is unexpired, no other actor can claim the event.
type Claim struct {
	// GroupID is the group of the claimed event.
	GroupID string `json:"group_id"`
	// EventID is the claimed event.
	EventID string `json:"event_id"`
	// Actor holds the claim.
	Actor string `json:"actor_id"`
	// ClaimedAt is when the actor first claimed the event; renewals keep it.
	ClaimedAt time.Time `json:"claimed_at"`
	// ExpiresAt is when the claim lapses; renewals move it.
	ExpiresAt time.Time `json:"expires_at"`
}

// Expired reports whether the claim has lapsed at now.
func (c Claim) Expired(now time.Time) bool { return !now.Before(c.ExpiresAt) }

// Store is a durable CCCS event ledger. Every method takes a context
// first; implementations are safe for concurrent use.
type Store interface {
	// Append appends records in one atomic batch and returns one result
	// per record, in order. It returns only once the batch is durable.
	// Records whose DedupeKey is already present (also earlier in the
	// same batch) are not appended; their result holds the first event
	// with Duplicate set. If ctx ends after the batch was queued, the batch
	// may still be committed; retrying with the same dedupe keys is safe.
	Append(ctx context.Context, recs []Record) ([]Result, error)

	// ImportEvents stores events exactly as given (id, ts, seq), in
	// order, for restoring an export. An event identical to one already
	// stored is skipped; an event whose seq is not its group's next, or
	// whose id or dedupe key exists with other content, is refused with
	// ErrConflict. It returns how many of evs were stored or skipped
	// before the first error; those are durable.
	ImportEvents(ctx context.Context, evs []Event) (int, error)

	// Get returns the event with the given id, or ErrNotFound.
	Get(ctx context.Context, id string) (Event, error)
	// GetByDedupeKey returns the event appended with the given dedupe
	// key, or ErrNotFound.
	GetByDedupeKey(ctx context.Context, key string) (Event, error)
	// Range returns the group's events with seq > sinceSeq in seq order,
	// only those whose kind is in kinds (all when kinds is empty), at most
	// limit of them (all when limit ≤ 0). An unknown group has no events.
	Range(ctx context.Context, group string, sinceSeq int64, kinds []string, limit int) ([]Event, error)
	// Groups lists every group with its last seq, ordered by group id.
	Groups(ctx context.Context) ([]Group, error)
	// Follow yields the group's events with seq > sinceSeq in seq order:
	// first those stored, then each new one as it is appended, without
	// gaps or repeats. It ends without an error when ctx is done, and
	// yields an error (ErrClosed when the store closes) as its last
	// element otherwise. A slow consumer does not slow down appends.
	Follow(ctx context.Context, group string, sinceSeq int64) iter.Seq2[Event, error]

	// Log returns the events of every group appended after position
	// after, in the order the store appended them, each with its
	// position, at most limit of them (limit must be positive: the log
	// is read in pages). Positions start at 1 and only grow; they are
	// not dense, and belong to this store (an import into another store
	// gets other positions). Position 0 is before the first event.
	Log(ctx context.Context, after int64, limit int) ([]Logged, error)
	// FollowLog yields Log's events after position after: first those
	// stored, then each new one as it is appended, without gaps or
	// repeats, reading in pages. It ends like Follow.
	FollowLog(ctx context.Context, after int64) iter.Seq2[Logged, error]
	// LogBefore is Log read backwards, for pages that show the newest
	// events first: the events at positions before position before (the
	// whole log when before ≤ 0), newest first, at most limit of them
	// (limit must be positive). A page's last position is the next
	// page's before: keyset pagination, never an offset.
	LogBefore(ctx context.Context, before int64, limit int) ([]Logged, error)

	// SetCursor sets actor's read cursor in group to the event eventID,
	// which must be an event of that group (else ErrNotFound). It
	// overwrites the previous cursor, also with an earlier event.
	SetCursor(ctx context.Context, group, actor, eventID string) (Cursor, error)
	// AdvanceCursor is SetCursor that never moves a cursor back: it sets
	// actor's cursor in group to eventID unless the cursor already
	// stands at or past that event, and returns the cursor as it then
	// stands. The read and the write are one atomic step, also against
	// other Stores on the same storage (two relays sharing a ledger), so
	// of two concurrent advances the later event always wins.
	AdvanceCursor(ctx context.Context, group, actor, eventID string) (Cursor, error)
	// GetCursor returns actor's read cursor in group, or ErrNotFound.
	GetCursor(ctx context.Context, group, actor string) (Cursor, error)

	// SetMark durably sets the mark called name, overwriting it (also
	// with an earlier position). The store does not check m against its
	// log; name must not be empty and m.Pos not negative (else
	// ErrInvalid).
	SetMark(ctx context.Context, name string, m Mark) error
	// GetMark returns the mark called name, or ErrNotFound.
	GetMark(ctx context.Context, name string) (Mark, error)

	// Claim claims the event eventID of group for actor until now+ttl.
	// The first claim wins; the holder may claim again to renew (extend)
	// it. While another actor's claim is unexpired, Claim returns that
	// claim and an error wrapping ErrClaimed; an expired claim is taken
	// over. The event must exist in the group (else ErrNotFound); ttl
	// must be positive and now not zero (else ErrInvalid).
	Claim(ctx context.Context, group, eventID, actor string, ttl time.Duration, now time.Time) (Claim, error)
	// ReleaseClaim drops actor's claim on the event. It returns
	// ErrNotFound if there is no claim and ErrClaimed if another actor
	// holds it.
	ReleaseClaim(ctx context.Context, group, eventID, actor string) error
	// ReleaseClaimAsRead drops the claim c (its GroupID, EventID and
	// Actor), as GetClaim returned it, only while it is still stored so:
	// a claim renewed (another ExpiresAt) or taken over since is kept,
	// and the call returns ErrClaimed; ErrNotFound when there is none. A
	// relay releasing an evicted holder's claim uses it, so that a holder
	// renewing meanwhile keeps the claim it was told it has.
	ReleaseClaimAsRead(ctx context.Context, c Claim) error
	// GetClaim returns the claim on the event that is unexpired at now,
	// or ErrNotFound.
	GetClaim(ctx context.Context, group, eventID string, now time.Time) (Claim, error)

	// Close finishes the appends already queued, then releases the
	// store's resources. Later calls of the other methods return
	// ErrClosed; calling Close again is harmless.
	Close() error
}

// NormalizeData checks that data is a JSON object and returns it compacted
// (nil or empty data becomes {}), so that every stored payload fits on one
// export line and compares byte for byte. The result never shares memory
// with data.
func NormalizeData(data json.RawMessage) (json.RawMessage, error) {
	// JSON's whitespace only (RFC 8259 §2): bytes.TrimSpace would also
	// drop \v, \f, U+0085 and U+00A0 and so accept data that is not JSON.
	trimmed := bytes.Trim(data, " \t\r\n")
	if len(trimmed) == 0 {
		return json.RawMessage("{}"), nil
	}
	if trimmed[0] != '{' {
		return nil, fmt.Errorf("%w: data is not a JSON object", ErrInvalid)
	}
	buf := compactBufs.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= 64<<10 {
			compactBufs.Put(buf)
		}
	}()
	buf.Reset()
	if err := json.Compact(buf, trimmed); err != nil {
		return nil, fmt.Errorf("%w: data: %v", ErrInvalid, err)
	}
	return json.RawMessage(bytes.Clone(buf.Bytes())), nil
}

// compactBufs holds NormalizeData's scratch buffers.
var compactBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// FormatTime formats t as an Event.TS: UTC, millisecond precision.
func FormatTime(t time.Time) string {
	return t.UTC().Truncate(time.Millisecond).Format(TimeLayout)
}

// Equal reports whether two events are the same event: every envelope
// field, the dedupe key, and data byte for byte after NormalizeData.
func Equal(a, b Event) bool {
	if a.V != b.V || a.ID != b.ID || a.TS != b.TS || a.Seq != b.Seq || a.Kind != b.Kind ||
		a.GroupID != b.GroupID || a.ScopeKey != b.ScopeKey || a.By != b.By || a.DedupeKey != b.DedupeKey {
		return false
	}
	ad, err1 := NormalizeData(a.Data)
	bd, err2 := NormalizeData(b.Data)
	return err1 == nil && err2 == nil && bytes.Equal(ad, bd)
}
