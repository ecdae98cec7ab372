package sqlite_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/sqlite"
)

// TestImportEventsRuns covers the import's fast path, runs of events stored
// many to a statement, and its way out when an event of a run is taken:
// long batches over several groups, a conflict in the middle of a run (the
// events before it stay, none after it, the groups' last seqs are right),
// and a batch that is already present.
func TestImportEventsRuns(t *testing.T) {
	ctx := t.Context()
	mk := func(group string, seq int64, key string) ledger.Event {
		return ledger.Event{V: ledger.Version, ID: envelope.NewID(), TS: "2026-01-13T10:00:00.000Z", Seq: seq,
			Kind: "chat.message", GroupID: group, By: "user", Data: json.RawMessage(fmt.Sprintf(`{"text": "event %d of %s"}`, seq, group)), DedupeKey: key}
	}
	// batch makes n events spread over groups, continuing from seqs.
	batch := func(seqs map[string]int64, groups []string, n int) []ledger.Event {
		var evs []ledger.Event
		for i := range n {
			g := groups[i%len(groups)]
			seqs[g]++
			evs = append(evs, mk(g, seqs[g], fmt.Sprintf("key-%s-%d", g, seqs[g])))
		}
		return evs
	}
	s := openTemp(t)
	seqs := map[string]int64{}
	first := batch(seqs, []string{"a", "b", "c"}, 300)
	if n, err := s.ImportEvents(ctx, first); n != 300 || err != nil {
		t.Fatalf("ImportEvents(300 events) = %d, %v, want 300, nil", n, err)
	}
	if n, err := s.ImportEvents(ctx, first); n != 300 || err != nil {
		t.Fatalf("ImportEvents(the same 300 again) = %d, %v, want 300, nil (skipped)", n, err)
	}

	// A run whose 101st event reuses a stored dedupe key, in a group
	// ("d") that did not exist before the batch.
	before := maps.Clone(seqs)
	second := batch(seqs, []string{"a", "d"}, 200)
	second[100].DedupeKey = first[5].DedupeKey
	n, err := s.ImportEvents(ctx, second)
	if n != 100 || !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("ImportEvents(conflict at 100) = %d, %v, want 100, ErrConflict", n, err)
	}
	// Stored: the first 100 of second, i.e. 50 in a, 50 in d.
	before["a"] += 50
	before["d"] = 50
	checkGroups(t, s, before)
	for _, ev := range second[100:] {
		if _, err := s.Get(ctx, ev.ID); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("Get(%s) after the refused event = %v, want ErrNotFound", ev.ID, err)
		}
	}

	// An id taken by another group's event, in a run of a new group.
	third := batch(map[string]int64{}, []string{"e"}, 100)
	third[70].ID = first[0].ID
	if n, err := s.ImportEvents(ctx, third); n != 70 || !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("ImportEvents(id taken at 70) = %d, %v, want 70, ErrConflict", n, err)
	}
	before["e"] = 70
	checkGroups(t, s, before)

	// The rest of second imports once the conflict is gone, continuing
	// where the stored prefix stopped.
	second[100].DedupeKey = "fresh"
	if n, err := s.ImportEvents(ctx, second); n != 200 || err != nil {
		t.Fatalf("ImportEvents(second, fixed) = %d, %v, want 200, nil", n, err)
	}
	checkGroups(t, s, map[string]int64{"a": seqs["a"], "b": seqs["b"], "c": seqs["c"], "d": seqs["d"], "e": 70})
	evs, err := s.Range(ctx, "d", 0, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, ev := range evs {
		got = append(got, ev.Seq)
	}
	want := make([]int64, seqs["d"])
	for i := range want {
		want[i] = int64(i + 1)
	}
	if !slices.Equal(got, want) {
		t.Errorf("Range(d) seqs = %v, want 1…%d", got, seqs["d"])
	}
	if ev, err := s.GetByDedupeKey(ctx, "fresh"); err != nil || ev.ID != second[100].ID {
		t.Errorf("GetByDedupeKey(fresh) = %s, %v, want %s", ev.ID, err, second[100].ID)
	}
}

// checkGroups checks that the store's groups and last seqs are want.
func checkGroups(t *testing.T, s ledger.Store, want map[string]int64) {
	t.Helper()
	if got := sqlite.LastSeqs(t, s); !maps.Equal(got, want) {
		t.Errorf("Groups() = %v, want %v", got, want)
	}
}
