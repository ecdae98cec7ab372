package attention

import (
	"strings"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// Intent is a Crosstalk envelope intent (AI Crosstalk v1.1 "Intent
// Registry"; docs/design.md §3.3), typed for the attention rules. The
// intents and their v1.0 names are package envelope's. Unknown intents are
// kept as they are.
type Intent string

// The eleven v1.1 intents (envelope.Intents).
const (
	IntentRequest   Intent = envelope.IntentRequest
	IntentRespond   Intent = envelope.IntentRespond
	IntentEscalate  Intent = envelope.IntentEscalate
	IntentHandoff   Intent = envelope.IntentHandoff
	IntentPoll      Intent = envelope.IntentPoll
	IntentACK       Intent = envelope.IntentAck
	IntentNACK      Intent = envelope.IntentNack
	IntentError     Intent = envelope.IntentError
	IntentBroadcast Intent = envelope.IntentBroadcast
	IntentRevoke    Intent = envelope.IntentRevoke
	IntentClose     Intent = envelope.IntentClose
)

// String returns the intent as written.
func (i Intent) String() string { return string(i) }

// Canonical returns the intent upper-cased and trimmed, with the v1.0
// legacy names mapped (envelope.NormalizeIntent: QUESTION→REQUEST,
// ANSWER→RESPOND, STATUS→BROADCAST, PATCH→REQUEST, NOTE→BROADCAST).
// Unknown intents come back upper-cased.
func (i Intent) Canonical() Intent {
	s := strings.ToUpper(strings.TrimSpace(string(i)))
	in, _, _ := envelope.NormalizeIntent(s)
	return Intent(in)
}

// AsksToMe reports whether a message of intent i must be answered by a
// recipient it names (C2A "Default Matrix", to_me): a REQUEST (and a
// message without an intent), ESCALATE, HANDOFF and POLL. It is Decide's
// to_me rule without the state, for callers that index messages before
// any agent reads them.
func (i Intent) AsksToMe() bool {
	switch i.Canonical() {
	case "", IntentRequest, IntentEscalate, IntentHandoff, IntentPoll:
		return true
	}
	return false
}

// Known reports whether the canonical form of i is one of the eleven v1.1
// intents.
func (i Intent) Known() bool { return envelope.KnownIntent(string(i.Canonical())) }

// Recipient selectors (CCCS §5.1) and priority spellings (CCCS §6.1,
// AI Crosstalk "meta: routing" X-Priority).
const (
	selectorAll        = "@all"
	selectorUser       = "@user"
	priorityAttention  = "attention"
	xPriorityHigh      = "high"
	xPriorityUrgent    = "urgent"
	defaultPriorityStr = "normal"
)

// bookkeeping reports whether kind records state rather than a message:
// read cursors, notify acks, claims, dispositions, reservations and
// liveness transitions. Nobody is asked to act on them.
func bookkeeping(kind string) bool {
	switch kind {
	case ledger.KindRead, ledger.KindNotifyAck, ledger.KindClaim, ledger.KindDisposition, ledger.KindDischarge,
		ledger.KindReservation, ledger.KindLiveness:
		return true
	}
	return false
}

// intentOf returns the intent the attention rules use for ev: its own
// (canonical) intent, or one inferred from its kind for events that did not
// come from an envelope: a plain chat.message reads as REQUEST (C2A's "DM to
// this session" row), chat.ack and chat.reaction as ACK. Anything else is
// left empty and handled as an unknown intent.
func intentOf(ev Event) Intent {
	if in := ev.Intent.Canonical(); in != "" {
		return in
	}
	switch ev.Kind {
	case ledger.KindMessage, "":
		return IntentRequest
	case ledger.KindAck, ledger.KindReaction:
		return IntentACK
	}
	return ""
}
