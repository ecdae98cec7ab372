package envelope

import "strings"

// The intents of the v1.1 registry (spec "Intent Registry v1.1").
const (
	IntentRequest   = "REQUEST"
	IntentRespond   = "RESPOND"
	IntentEscalate  = "ESCALATE"
	IntentHandoff   = "HANDOFF"
	IntentPoll      = "POLL"
	IntentAck       = "ACK"
	IntentNack      = "NACK"
	IntentError     = "ERROR"
	IntentBroadcast = "BROADCAST"
	IntentRevoke    = "REVOKE"
	IntentClose     = "CLOSE"
)

// Intents lists the v1.1 intents in the spec's order.
var Intents = []string{
	IntentRequest, IntentRespond, IntentEscalate, IntentHandoff, IntentPoll,
	IntentAck, IntentNack, IntentError, IntentBroadcast, IntentRevoke, IntentClose,
}

// legacyIntents maps the deprecated v1.0 intents to v1.1 (docs/design.md §3.1).
var legacyIntents = map[string]string{
	"QUESTION": IntentRequest,
	"ANSWER":   IntentRespond,
	"STATUS":   IntentBroadcast,
	"PATCH":    IntentRequest,
	"NOTE":     IntentBroadcast,
}

// NormalizeIntent maps an intent as written to its v1.1 form. Known intents
// match without regard to case and come back in upper case. A legacy intent
// comes back mapped, with legacy set to the text as written. An unknown
// intent comes back verbatim with known false: it is never changed.
func NormalizeIntent(s string) (intent, legacy string, known bool) {
	if k := registryIntent(s); k != "" {
		return k, "", true // as written by every composer: no case mapping needed
	}
	u := strings.ToUpper(s)
	for _, k := range Intents {
		if u == k {
			return k, "", true
		}
	}
	if m, ok := legacyIntents[u]; ok {
		return m, s, true
	}
	return s, "", false
}

// registryIntent returns the v1.1 intent s is, written exactly (upper
// case), or "".
func registryIntent(s string) string {
	switch s {
	case IntentRequest:
		return IntentRequest
	case IntentRespond:
		return IntentRespond
	case IntentEscalate:
		return IntentEscalate
	case IntentHandoff:
		return IntentHandoff
	case IntentPoll:
		return IntentPoll
	case IntentAck:
		return IntentAck
	case IntentNack:
		return IntentNack
	case IntentError:
		return IntentError
	case IntentBroadcast:
		return IntentBroadcast
	case IntentRevoke:
		return IntentRevoke
	case IntentClose:
		return IntentClose
	}
	return ""
}

// KnownIntent reports whether s is a v1.1 intent (exact, upper case).
func KnownIntent(s string) bool {
	for _, k := range Intents {
		if s == k {
			return true
		}
	}
	return false
}
