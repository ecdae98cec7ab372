package attention

import "strings"

// signalTable is C2A "Reaction Signals": default glyph and the disposition
// each signal records. unclear records none ("-" in the spec).
//
// The copy of the spec in docs/spec lost the glyphs of claimed, done and
// unclear; ✋, ✅ and ❓ are this package's choice.
var signalTable = map[Signal]struct {
	glyph string
	disp  Disposition
}{
	SignalSeen:     {"👀", Acknowledged},
	SignalAgree:    {"👍", Acknowledged},
	SignalWorking:  {"🔧", Claimed},
	SignalQueued:   {"🕐", Deferred},
	SignalClaimed:  {"✋", Claimed},
	SignalDone:     {"✅", Responded},
	SignalDeclined: {"🙅", Ignored},
	SignalBlocked:  {"🚧", Deferred},
	SignalUnclear:  {"❓", ""},
}

// Disposition returns the disposition the signal records (C2A "Reaction
// Signals" table). ok is false for unclear, which records none, and for
// unknown signals.
func (s Signal) Disposition() (d Disposition, ok bool) {
	e, found := signalTable[s]
	if !found || e.disp == "" {
		return "", false
	}
	return e.disp, true
}

// Glyph returns the default glyph of a known signal, or "". Workspaces may
// remap glyphs; agents reason about signals, not glyphs.
func (s Signal) Glyph() string { return signalTable[s].glyph }

// SignalForGlyph maps a default glyph back to its signal. A variation
// selector (U+FE0F) on the input is ignored.
func SignalForGlyph(glyph string) (Signal, bool) {
	g := strings.TrimSpace(strings.ReplaceAll(glyph, "\uFE0F", ""))
	for _, s := range allSignals {
		if signalTable[s].glyph == g {
			return s, true
		}
	}
	return "", false
}

// SignalForIntent returns the signal an envelope intent is recorded as when
// it becomes a chat.reaction (docs/design.md §5.2): ACK is agree, NACK is declined.
func SignalForIntent(i Intent) (Signal, bool) {
	switch i.Canonical() {
	case IntentACK:
		return SignalAgree, true
	case IntentNACK:
		return SignalDeclined, true
	}
	return "", false
}

// DispositionForAction maps the relay's event actions (docs/design.md §5.6
// .../{ack,read,react,claim,defer,resolve}; C2A chat.claim, chat.defer,
// chat.resolve) to the disposition they record. react depends on its
// signal (see Signal.Disposition) and read records none: a read cursor is
// not a disposition (CCCS §6.3).
func DispositionForAction(action string) (Disposition, bool) {
	switch strings.ToLower(strings.TrimSpace(action)) {
	case "ack":
		return Acknowledged, true
	case "claim":
		return Claimed, true
	case "defer":
		return Deferred, true
	case "resolve":
		return Responded, true
	}
	return "", false
}

// Settles reports whether disposition d closes an event delivered under
// policy p (C2A "Event Disposition"):
//
//   - must_respond: responded, acknowledged, deferred, superseded or failed
//     (claimed is ownership, not an answer: the obligation stays open);
//   - ack_only: acknowledged or ignored (and superseded or failed);
//   - must_not_respond: ignored, superseded or failed;
//   - may_respond: any disposition.
//
// Unknown policies or dispositions never settle.
func Settles(p Policy, d Disposition) bool {
	if !d.Valid() {
		return false
	}
	switch p {
	case MustRespond:
		return d != Claimed && d != Ignored
	case AckOnly:
		return d == Acknowledged || d == Ignored || d == Superseded || d == Failed
	case MustNotRespond:
		return d == Ignored || d == Superseded || d == Failed
	case MayRespond:
		return true
	}
	return false
}

// DefaultDisposition is the disposition a host may record without asking the
// agent: must_not_respond events become ignored (C2A "Event Disposition").
// ok is false for every other policy.
func DefaultDisposition(p Policy) (d Disposition, ok bool) {
	if p == MustNotRespond {
		return Ignored, true
	}
	return "", false
}
