package reserve

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// benchEvents is n grant events of 100 agents on 100 directories, each
// lasting an hour, one a second: about 3600 live at the end of a long run.
func benchEvents(n int) []ledger.Event {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	evs := make([]ledger.Event, n)
	for i := range evs {
		at := t0.Add(time.Duration(i) * time.Second)
		d, _ := json.Marshal(EventData{Action: ActionGrant, Agent: fmt.Sprint("agent", i%100), Scope: fmt.Sprintf("dir%d/f%d", i%100, i),
			ExpiresAt: ledger.FormatTime(at.Add(time.Hour))})
		evs[i] = ledger.Event{V: 1, ID: fmt.Sprint("ev", i), TS: ledger.FormatTime(at), Seq: int64(i + 1), Kind: ledger.KindReservation,
			GroupID: DefaultGroup, By: fmt.Sprint("agent", i%100), Data: d}
	}
	return evs
}

// BenchmarkRebuild folds 10 000 reservation events into a table, as a
// relay does on start (go test -bench Rebuild ./gateway/reserve).
func BenchmarkRebuild(b *testing.B) {
	evs := benchEvents(10000)
	for b.Loop() {
		t := NewTable()
		for _, ev := range evs {
			if err := t.Apply(ev); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkDecide decides a two-scope request against about 3600 live
// reservations.
func BenchmarkDecide(b *testing.B) {
	t := NewTable()
	evs := benchEvents(10000)
	for _, ev := range evs {
		t.Apply(ev)
	}
	now, _ := evs[len(evs)-1].Time()
	req := Request{Agent: "newcomer", Scopes: []string{"other/x", "docs/api.md"}, TTL: time.Minute}
	for b.Loop() {
		if _, err := t.Decide(req, now, Policy{}); err != nil {
			b.Fatal(err)
		}
	}
}
