package attention

import "strings"

// Intent is a Crosstalk envelope intent (AI Crosstalk v1.1 "Intent
// Registry"; DESIGN §3.3). It is defined here, not imported from envelope,
// so that this package stays a leaf. Unknown intents are kept as they are.
type Intent string

// The eleven v1.1 intents.
const (
	IntentRequest   Intent = "REQUEST"
	IntentRespond   Intent = "RESPOND"
	IntentEscalate  Intent = "ESCALATE"
	IntentHandoff   Intent = "HANDOFF"
	IntentPoll      Intent = "POLL"
	IntentACK       Intent = "ACK"
	IntentNACK      Intent = "NACK"
	IntentError     Intent = "ERROR"
	IntentBroadcast Intent = "BROADCAST"
	IntentRevoke    Intent = "REVOKE"
	IntentClose     Intent = "CLOSE"
)

var allIntents = []Intent{IntentRequest, IntentRespond, IntentEscalate, IntentHandoff, IntentPoll,
	IntentACK, IntentNACK, IntentError, IntentBroadcast, IntentRevoke, IntentClose}

// legacyIntents is the v1.0 mapping of DESIGN §3.1.
var legacyIntents = map[string]Intent{
	"QUESTION": IntentRequest,
	"ANSWER":   IntentRespond,
	"STATUS":   IntentBroadcast,
	"PATCH":    IntentRequest,
	"NOTE":     IntentBroadcast,
}

// String returns the intent as written.
func (i Intent) String() string { return string(i) }

// Canonical returns the intent upper-cased and trimmed, with the v1.0
// legacy names mapped (QUESTION→REQUEST, ANSWER→RESPOND, STATUS→BROADCAST,
// PATCH→REQUEST, NOTE→BROADCAST). Unknown intents come back upper-cased.
func (i Intent) Canonical() Intent {
	s := strings.ToUpper(strings.TrimSpace(string(i)))
	if m, ok := legacyIntents[s]; ok {
		return m
	}
	return Intent(s)
}

// Known reports whether the canonical form of i is one of the eleven v1.1
// intents.
func (i Intent) Known() bool { return valid(i.Canonical(), allIntents) }

// Ledger event kinds this package distinguishes (CCCS v1 §6–7, DESIGN §5.2).
const (
	KindChatMessage  = "chat.message"
	KindChatAck      = "chat.ack"
	KindChatRead     = "chat.read"
	KindChatReaction = "chat.reaction"
	KindSystemNotify = "system.notify"
	KindNotifyAck    = "system.notify_ack"
	KindClaim        = "x.crosstalk.claim"
	KindDisposition  = "x.crosstalk.disposition"
)

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
// read cursors, notify acks, claims and dispositions. Nobody is asked to
// act on them.
func bookkeeping(kind string) bool {
	switch kind {
	case KindChatRead, KindNotifyAck, KindClaim, KindDisposition:
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
	case KindChatMessage, "":
		return IntentRequest
	case KindChatAck, KindChatReaction:
		return IntentACK
	}
	return ""
}
