package attention

import (
	"reflect"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// TestSummarize checks C2A "digest": only BROADCAST status traffic, grouped,
// never body text, policy must_not_respond.
func TestSummarize(t *testing.T) {
	mk := func(id string, seq int64, from, group, ctx string, intent Intent, to ...string) Event {
		return Event{ID: id, Seq: seq, Group: group, Kind: ledger.KindMessage, From: from, To: to, Intent: intent,
			Context: ctx, CreatedAt: t0.Add(time.Duration(seq) * time.Second)}
	}
	events := []Event{
		mk("e1", 1, "gemini", "g1", "deploy", IntentBroadcast),
		mk("e2", 2, "codex", "g1", "deploy", "STATUS"),
		mk("e3", 3, "gemini", "g1", "tests", IntentBroadcast),
		mk("e4", 4, "gemini", "g1", "deploy", IntentRequest, "claude"), // to_me: not digested
		mk("e5", 5, "gemini", "g1", "deploy", IntentRequest),           // ambient but not a broadcast: tool_mailbox
		mk("e6", 6, "claude", "g1", "deploy", IntentBroadcast),         // own event: silent
		mk("e7", 7, "gemini", "g2", "deploy", IntentBroadcast),
		mk("e8", 8, "gemini", "g1", "deploy", IntentBroadcast),
	}
	got := Summarize(events, me, State{}, t0.Add(time.Minute))
	want := Summary{
		Agent: "claude", Policy: MustNotRespond, At: t0.Add(time.Minute), Count: 5,
		Entries: []SummaryEntry{
			{Group: "g1", Context: "deploy", Topic: "broadcast about deploy", Authors: []string{"gemini", "codex"}, Count: 3,
				EventIDs: []string{"e1", "e2", "e8"}, FirstSeq: 1, LastSeq: 8, First: t0.Add(time.Second), Last: t0.Add(8 * time.Second)},
			{Group: "g1", Context: "tests", Topic: "broadcast about tests", Authors: []string{"gemini"}, Count: 1,
				EventIDs: []string{"e3"}, FirstSeq: 3, LastSeq: 3, First: t0.Add(3 * time.Second), Last: t0.Add(3 * time.Second)},
			{Group: "g2", Context: "deploy", Topic: "broadcast about deploy", Authors: []string{"gemini"}, Count: 1,
				EventIDs: []string{"e7"}, FirstSeq: 7, LastSeq: 7, First: t0.Add(7 * time.Second), Last: t0.Add(7 * time.Second)},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Summarize() = %+v\nwant %+v", got, want)
	}
	if empty := Summarize(nil, me, State{}, t0); empty.Count != 0 || empty.Entries != nil || empty.Policy != MustNotRespond {
		t.Errorf("Summarize(nil) = %+v, want an empty must_not_respond summary", empty)
	}
}
