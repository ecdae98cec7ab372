package attention

import (
	"slices"
	"time"
)

// Summary is a digest for one agent: the events Decide gave injection
// digest (BROADCAST status traffic), grouped by group and context, without
// any body text (C2A "digest"). Its Policy is always must_not_respond: an
// event with an explicit mention or assignment is never digested.
type Summary struct {
	Agent   string         `json:"agent"`             // the agent the digest is for
	Policy  Policy         `json:"policy"`            // always must_not_respond
	At      time.Time      `json:"at"`                // the now it was made at
	Count   int            `json:"count"`             // events summarised
	Entries []SummaryEntry `json:"entries,omitempty"` // one per (group, context)
}

// SummaryEntry is one group and context of a Summary.
type SummaryEntry struct {
	Group    string    `json:"group,omitempty"`   // Event.Group
	Context  string    `json:"context,omitempty"` // Event.Context, as sent
	Topic    string    `json:"topic"`             // as in a Knock: made from intent + context
	Authors  []string  `json:"authors"`           // in order of first appearance
	Count    int       `json:"count"`             // events in the entry
	EventIDs []string  `json:"event_ids"`         // in input order
	FirstSeq int64     `json:"first_seq"`         // lowest Seq
	LastSeq  int64     `json:"last_seq"`          // highest Seq
	First    time.Time `json:"first,omitzero"`    // earliest CreatedAt
	Last     time.Time `json:"last,omitzero"`     // latest CreatedAt
}

// Summarize builds agent a's digest of events at now. It keeps the events
// that Decide(ev, a, st, now) gives injection digest and groups them by
// (group, context), entries ordered by their first appearance in events
// (pass events in ledger order). Other events are skipped, so the caller
// may pass a whole window of the ledger.
func Summarize(events []Event, a Agent, st State, now time.Time) Summary {
	s := Summary{Agent: a.ID, Policy: MustNotRespond, At: now}
	for _, ev := range events {
		if Decide(ev, a, st, now).Injection == Digest {
			s.Add(ev)
		}
	}
	return s
}

// Add counts ev in the summary, in the entry of its (group, context),
// appended when it is the first of them. The caller decides that ev is
// one to digest; Summarize uses Decide.
func (s *Summary) Add(ev Event) {
	i := slices.IndexFunc(s.Entries, func(e SummaryEntry) bool { return e.Group == ev.Group && e.Context == ev.Context })
	if i < 0 {
		i = len(s.Entries)
		s.Entries = append(s.Entries, SummaryEntry{
			Group: ev.Group, Context: ev.Context, Topic: Topic(ev),
			FirstSeq: ev.Seq, LastSeq: ev.Seq, First: ev.CreatedAt, Last: ev.CreatedAt,
		})
	}
	e := &s.Entries[i]
	e.Count++
	e.EventIDs = append(e.EventIDs, ev.ID)
	if !slices.Contains(e.Authors, ev.From) {
		e.Authors = append(e.Authors, ev.From)
	}
	e.FirstSeq, e.LastSeq = min(e.FirstSeq, ev.Seq), max(e.LastSeq, ev.Seq)
	if !ev.CreatedAt.IsZero() {
		if e.First.IsZero() || ev.CreatedAt.Before(e.First) {
			e.First = ev.CreatedAt
		}
		if ev.CreatedAt.After(e.Last) {
			e.Last = ev.CreatedAt
		}
	}
	s.Count++
}
