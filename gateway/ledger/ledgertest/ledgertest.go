// Package ledgertest is the conformance suite every ledger.Store
// implementation runs (docs/design.md §6: one suite, every implementation). It
// checks the guarantees listed in the ledger package comment: dense seq
// under concurrency, idempotency forever, atomic batches, Range, Follow,
// cursors, claims and export/import.
//
// An implementation's test calls Run with a function that opens a fresh,
// empty Store (and registers its Close with t.Cleanup; Close must be
// safe to call twice), and RunReopen if its storage outlives a Store.
package ledgertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// waitLimit bounds every wait of the suite, so a broken Store fails
// instead of hanging.
const waitLimit = 30 * time.Second

// Run runs the conformance suite. open must return a new, empty Store for
// each call.
func Run(t *testing.T, open func(t *testing.T) ledger.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s ledger.Store)
	}{
		{"Append/Fields", testAppendFields},
		{"Append/Empty", testAppendEmpty},
		{"Append/Invalid", testAppendInvalid},
		{"Append/DenseSeqConcurrent", testDenseSeqConcurrent},
		{"Append/DedupeForever", testDedupeForever},
		{"Append/DedupeConcurrent", testDedupeConcurrent},
		{"Append/BatchDuplicates", testBatchDuplicates},
		{"Append/TimestampsOrdered", testTimestampsOrdered},
		{"Get", testGet},
		{"Range", testRange},
		{"Groups", testGroups},
		{"Follow/ReplayAndLive", testFollowReplayAndLive},
		{"Follow/SlowFollower", testFollowSlow},
		{"Follow/Cancel", testFollowCancel},
		{"Follow/Close", testFollowClose},
		{"Log", testLog},
		{"Log/FollowReplayAndLive", testFollowLog},
		{"Cursors", testCursors},
		{"Cursors/Advance", testAdvanceCursor},
		{"Cursors/AdvanceConcurrent", testAdvanceCursorConcurrent},
		{"Cursors/List", testCursorsOf},
		{"Marks", testMarks},
		{"Claims", testClaims},
		{"Claims/Concurrent", testClaimsConcurrent},
		{"Claims/ReleaseAsRead", testReleaseClaimAsRead},
		{"ExportImport/RoundTrip", testExportImport},
		{"ExportImport/BadLines", testImportBadLines},
		{"ImportEvents", testImportEvents},
		{"Close", testClose},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.fn(t, open(t))
		})
	}
	t.Run("ExportImport/TwoStores", func(t *testing.T) {
		testExportImportTwo(t, open(t), open(t))
	})
}

// RunReopen checks that events, dedupe keys, cursors and claims survive
// closing a Store and opening a new one on the same storage. storage
// prepares fresh storage and returns a function that opens a Store on it;
// the suite calls that function several times, closing each Store before
// opening the next.
func RunReopen(t *testing.T, storage func(t *testing.T) func() ledger.Store) {
	t.Run("Reopen", func(t *testing.T) {
		open := storage(t)
		ctx := testContext(t)
		now := time.Now()

		s := open()
		var want []ledger.Event
		for i := range 5 {
			want = append(want, appendOne(t, s, rec("g", "chat.message", fmt.Sprintf("k%d", i))).Event)
		}
		if _, err := s.SetCursor(ctx, "g", "alice", want[2].ID); err != nil {
			t.Fatalf("SetCursor(g, alice, %s) error = %v", want[2].ID, err)
		}
		if _, err := s.Claim(ctx, "g", want[1].ID, "bob", time.Hour, now); err != nil {
			t.Fatalf("Claim(g, %s, bob) error = %v", want[1].ID, err)
		}
		mark := ledger.Mark{Pos: 3, EventID: want[2].ID}
		if err := s.SetMark(ctx, "outbound", mark); err != nil {
			t.Fatalf("SetMark(outbound) error = %v", err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("Close() = %v", err)
		}

		s = open()
		defer s.Close()
		checkEvents(t, "after reopen", rangeAll(t, s, "g"), want)
		res := appendOne(t, s, rec("g", "chat.message", "k3"))
		if !res.Duplicate || res.Event.ID != want[3].ID {
			t.Errorf("Append(k3) after reopen = %s duplicate %v, want %s duplicate true", res.Event.ID, res.Duplicate, want[3].ID)
		}
		if res := appendOne(t, s, rec("g", "chat.message", "")); res.Event.Seq != 6 {
			t.Errorf("Append(new) after reopen seq = %d, want 6", res.Event.Seq)
		}
		if c, err := s.GetCursor(ctx, "g", "alice"); err != nil || c.EventID != want[2].ID || c.Seq != 3 {
			t.Errorf("GetCursor(g, alice) after reopen = %+v, %v, want %s seq 3", c, err, want[2].ID)
		}
		if c, err := s.GetClaim(ctx, "g", want[1].ID, now); err != nil || c.Actor != "bob" {
			t.Errorf("GetClaim(g, %s) after reopen = %+v, %v, want bob", want[1].ID, c, err)
		}
		if m, err := s.GetMark(ctx, "outbound"); err != nil || m != mark {
			t.Errorf("GetMark(outbound) after reopen = %+v, %v, want %+v", m, err, mark)
		}
	})
}

// testContext returns a context that ends with the test or after
// waitLimit.
func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	t.Cleanup(cancel)
	return ctx
}

// rec makes a record with a small data object naming its dedupe key.
func rec(group, kind, key string) ledger.Record {
	data := fmt.Sprintf(`{"text": %q}`, "msg "+key)
	return ledger.Record{Kind: kind, GroupID: group, By: "user", Data: json.RawMessage(data), DedupeKey: key}
}

func appendOne(t *testing.T, s ledger.Store, r ledger.Record) ledger.Result {
	t.Helper()
	res, err := s.Append(testContext(t), []ledger.Record{r})
	if err != nil {
		t.Fatalf("Append(%+v) error = %v", r, err)
	}
	if len(res) != 1 {
		t.Fatalf("Append(%+v) = %d results, want 1", r, len(res))
	}
	return res[0]
}

func rangeAll(t *testing.T, s ledger.Store, group string) []ledger.Event {
	t.Helper()
	evs, err := s.Range(testContext(t), group, 0, nil, 0)
	if err != nil {
		t.Fatalf("Range(%q, 0, nil, 0) error = %v", group, err)
	}
	return evs
}

func seqs(evs []ledger.Event) []int64 {
	out := make([]int64, len(evs))
	for i, ev := range evs {
		out[i] = ev.Seq
	}
	return out
}

func denseFrom(first, n int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = first + int64(i)
	}
	return out
}

// checkEvents fails unless got and want hold equal events, in order.
func checkEvents(t *testing.T, what string, got, want []ledger.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d events (seqs %v), want %d (seqs %v)", what, len(got), seqs(got), len(want), seqs(want))
	}
	for i := range got {
		if !ledger.Equal(got[i], want[i]) {
			t.Errorf("%s: event %d = %+v, want %+v", what, i, got[i], want[i])
		}
	}
}

func testAppendFields(t *testing.T, s ledger.Store) {
	before := time.Now().Add(-time.Second)
	r := ledger.Record{
		Kind: "chat.message", GroupID: "g1", ScopeKey: "", By: "claude",
		Data:      json.RawMessage("{ \"text\" : \"hi\",\n \"to\": [\"@all\"] }"),
		DedupeKey: "01J9ZZZZZZZZZZZZZZZZZZZZZZ",
	}
	res := appendOne(t, s, r)
	ev := res.Event
	if res.Duplicate {
		t.Errorf("Append(first).Duplicate = true, want false")
	}
	if !envelope.IsULID(ev.ID) {
		t.Errorf("Append().Event.ID = %q, want a ULID", ev.ID)
	}
	want := ledger.Event{V: 1, ID: ev.ID, TS: ev.TS, Seq: 1, Kind: "chat.message", GroupID: "g1", ScopeKey: "", By: "claude",
		Data: json.RawMessage(`{"text":"hi","to":["@all"]}`), DedupeKey: r.DedupeKey}
	if !ledger.Equal(ev, want) || string(ev.Data) != string(want.Data) {
		t.Errorf("Append().Event = %+v (data %s), want %+v (data %s)", ev, ev.Data, want, want.Data)
	}
	ts, err := time.Parse(ledger.TimeLayout, ev.TS)
	if err != nil {
		t.Errorf("Append().Event.TS = %q, want layout %s: %v", ev.TS, ledger.TimeLayout, err)
	} else if ts.Before(before) || ts.After(time.Now().Add(time.Second)) {
		t.Errorf("Append().Event.TS = %s, want about now", ev.TS)
	}

	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	wantKeys := []string{"by", "data", "group_id", "id", "kind", "scope_key", "seq", "ts", "v"}
	if !slices.Equal(keys, wantKeys) {
		t.Errorf("json.Marshal(event) keys = %v, want %v", keys, wantKeys)
	}
	if string(m["scope_key"]) != `""` {
		t.Errorf("json.Marshal(event) scope_key = %s, want \"\"", m["scope_key"])
	}

	got, err := s.Get(testContext(t), ev.ID)
	if err != nil || !ledger.Equal(got, ev) {
		t.Errorf("Get(%s) = %+v, %v, want %+v", ev.ID, got, err, ev)
	}
}

func testAppendEmpty(t *testing.T, s ledger.Store) {
	res, err := s.Append(testContext(t), nil)
	if err != nil || len(res) != 0 {
		t.Errorf("Append(nil) = %v, %v, want no results, nil", res, err)
	}
	if gs, err := s.Groups(testContext(t)); err != nil || len(gs) != 0 {
		t.Errorf("Groups() after Append(nil) = %v, %v, want none", gs, err)
	}
}

func testAppendInvalid(t *testing.T, s ledger.Store) {
	good := rec("g", "chat.message", "")
	tests := []struct {
		name string
		rec  ledger.Record
	}{
		{"no kind", ledger.Record{GroupID: "g", Data: json.RawMessage(`{}`)}},
		{"no group", ledger.Record{Kind: "chat.message", Data: json.RawMessage(`{}`)}},
		{"data array", ledger.Record{Kind: "chat.message", GroupID: "g", Data: json.RawMessage(`[1]`)}},
		{"data string", ledger.Record{Kind: "chat.message", GroupID: "g", Data: json.RawMessage(`"x"`)}},
		{"data broken", ledger.Record{Kind: "chat.message", GroupID: "g", Data: json.RawMessage(`{"a":`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Append(testContext(t), []ledger.Record{good, tt.rec})
			if !errors.Is(err, ledger.ErrInvalid) {
				t.Errorf("Append(good, %s) error = %v, want ErrInvalid", tt.name, err)
			}
		})
	}
	if evs := rangeAll(t, s, "g"); len(evs) != 0 {
		t.Errorf("Range(g) after refused batches = %d events, want 0 (batches are atomic)", len(evs))
	}
	// nil data is stored as {}.
	res := appendOne(t, s, ledger.Record{Kind: "chat.message", GroupID: "g"})
	if string(res.Event.Data) != "{}" {
		t.Errorf("Append(nil data).Event.Data = %s, want {}", res.Event.Data)
	}
}

func testDenseSeqConcurrent(t *testing.T, s ledger.Store) {
	const workers, perWorker = 16, 12
	groups := []string{"ga", "gb"}
	ctx := testContext(t)
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				g := groups[(w+i)%len(groups)]
				recs := []ledger.Record{rec(g, "chat.message", "")}
				if i%4 == 0 { // some batches of two, spanning both groups
					recs = append(recs, rec(groups[(w+i+1)%len(groups)], "chat.message", ""))
				}
				if _, err := s.Append(ctx, recs); err != nil {
					errc <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatalf("concurrent Append error = %v", err)
	}
	total := 0
	ids := make(map[string]bool)
	for _, g := range groups {
		evs := rangeAll(t, s, g)
		total += len(evs)
		if got, want := seqs(evs), denseFrom(1, int64(len(evs))); !slices.Equal(got, want) {
			t.Errorf("Range(%s) seqs = %v, want %v", g, got, want)
		}
		for _, ev := range evs {
			if ids[ev.ID] {
				t.Errorf("event id %s appears twice", ev.ID)
			}
			ids[ev.ID] = true
		}
	}
	if want := workers * (perWorker + perWorker/4); total != want {
		t.Errorf("events after concurrent appends = %d, want %d", total, want)
	}
}

func testDedupeForever(t *testing.T, s ledger.Store) {
	first := appendOne(t, s, rec("g", "chat.message", "key-1"))
	for range 20 {
		appendOne(t, s, rec("g", "chat.message", ""))
	}
	// The same key again, with other data and even another group.
	again := rec("other", "chat.reaction", "key-1")
	res := appendOne(t, s, again)
	if !res.Duplicate {
		t.Errorf("Append(key-1 again).Duplicate = false, want true")
	}
	if !ledger.Equal(res.Event, first.Event) {
		t.Errorf("Append(key-1 again).Event = %+v, want the first %+v", res.Event, first.Event)
	}
	if evs := rangeAll(t, s, "other"); len(evs) != 0 {
		t.Errorf("Range(other) = %d events, want 0", len(evs))
	}
	if evs := rangeAll(t, s, "g"); len(evs) != 21 {
		t.Errorf("Range(g) = %d events, want 21", len(evs))
	}
}

func testDedupeConcurrent(t *testing.T, s ledger.Store) {
	const n = 32
	ctx := testContext(t)
	results := make([]ledger.Result, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var res []ledger.Result
			res, errs[i] = s.Append(ctx, []ledger.Record{rec("g", "chat.message", "same")})
			if errs[i] == nil {
				results[i] = res[0]
			}
		})
	}
	wg.Wait()
	fresh := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("Append(same) #%d error = %v", i, errs[i])
		}
		if !results[i].Duplicate {
			fresh++
		}
		if results[i].Event.ID != results[0].Event.ID {
			t.Errorf("Append(same) #%d id = %s, want %s", i, results[i].Event.ID, results[0].Event.ID)
		}
	}
	if fresh != 1 {
		t.Errorf("concurrent Append(same): %d non-duplicate results, want exactly 1", fresh)
	}
	if evs := rangeAll(t, s, "g"); len(evs) != 1 {
		t.Errorf("Range(g) after concurrent duplicates = %d events, want 1", len(evs))
	}
}

func testBatchDuplicates(t *testing.T, s ledger.Store) {
	pre := appendOne(t, s, rec("g", "chat.message", "old"))
	batch := []ledger.Record{
		rec("g", "chat.message", "k1"),
		rec("g", "chat.message", "k2"),
		rec("g", "chat.message", "k1"),
		rec("g", "chat.message", ""),
		rec("g", "chat.message", "old"),
		rec("g", "chat.message", ""),
	}
	res, err := s.Append(testContext(t), batch)
	if err != nil {
		t.Fatalf("Append(batch) error = %v", err)
	}
	type out struct {
		seq int64
		dup bool
	}
	want := []out{{2, false}, {3, false}, {2, true}, {4, false}, {1, true}, {5, false}}
	if len(res) != len(want) {
		t.Fatalf("Append(batch) = %d results, want %d", len(res), len(want))
	}
	for i, r := range res {
		if got := (out{r.Event.Seq, r.Duplicate}); got != want[i] {
			t.Errorf("Append(batch)[%d] = seq %d dup %v, want seq %d dup %v", i, got.seq, got.dup, want[i].seq, want[i].dup)
		}
	}
	if res[2].Event.ID != res[0].Event.ID || res[4].Event.ID != pre.Event.ID {
		t.Errorf("Append(batch) duplicates point to %s and %s, want %s and %s", res[2].Event.ID, res[4].Event.ID, res[0].Event.ID, pre.Event.ID)
	}
	if got := seqs(rangeAll(t, s, "g")); !slices.Equal(got, denseFrom(1, 5)) {
		t.Errorf("Range(g) seqs = %v, want %v", got, denseFrom(1, 5))
	}
}

func testTimestampsOrdered(t *testing.T, s ledger.Store) {
	for range 10 {
		appendOne(t, s, rec("g", "chat.message", ""))
	}
	prev := ""
	for _, ev := range rangeAll(t, s, "g") {
		if ev.TS < prev {
			t.Errorf("event seq %d ts %s is before the previous %s", ev.Seq, ev.TS, prev)
		}
		prev = ev.TS
	}
}

func testGet(t *testing.T, s ledger.Store) {
	ctx := testContext(t)
	a := appendOne(t, s, rec("g", "chat.message", "ka")).Event
	b := appendOne(t, s, rec("g", "chat.message", "")).Event
	tests := []struct {
		name    string
		get     func() (ledger.Event, error)
		want    ledger.Event
		wantErr error
	}{
		{"Get(a)", func() (ledger.Event, error) { return s.Get(ctx, a.ID) }, a, nil},
		{"Get(b)", func() (ledger.Event, error) { return s.Get(ctx, b.ID) }, b, nil},
		{"Get(unknown)", func() (ledger.Event, error) { return s.Get(ctx, envelope.NewID()) }, ledger.Event{}, ledger.ErrNotFound},
		{"GetByDedupeKey(ka)", func() (ledger.Event, error) { return s.GetByDedupeKey(ctx, "ka") }, a, nil},
		{"GetByDedupeKey(unknown)", func() (ledger.Event, error) { return s.GetByDedupeKey(ctx, "nope") }, ledger.Event{}, ledger.ErrNotFound},
		{"GetByDedupeKey(empty)", func() (ledger.Event, error) { return s.GetByDedupeKey(ctx, "") }, ledger.Event{}, ledger.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.get()
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("%s error = %v, want %v", tt.name, err, tt.wantErr)
				}
				return
			}
			if err != nil || !ledger.Equal(got, tt.want) {
				t.Errorf("%s = %+v, %v, want %+v", tt.name, got, err, tt.want)
			}
		})
	}
}

func testRange(t *testing.T, s ledger.Store) {
	kinds := []string{"chat.message", "chat.ack", "chat.message", "system.notify", "chat.message", "chat.read", "chat.message"}
	var recs []ledger.Record
	for _, k := range kinds {
		recs = append(recs, rec("g", k, ""))
	}
	recs = append(recs, rec("h", "chat.message", ""))
	if _, err := s.Append(testContext(t), recs); err != nil {
		t.Fatalf("Append() error = %v", err)
	}
	tests := []struct {
		group string
		since int64
		kinds []string
		limit int
		want  []int64
	}{
		{"g", 0, nil, 0, []int64{1, 2, 3, 4, 5, 6, 7}},
		{"g", 3, nil, 0, []int64{4, 5, 6, 7}},
		{"g", 7, nil, 0, nil},
		{"g", 100, nil, 0, nil},
		{"g", 0, nil, 2, []int64{1, 2}},
		{"g", 2, nil, 3, []int64{3, 4, 5}},
		{"g", 0, []string{"chat.message"}, 0, []int64{1, 3, 5, 7}},
		{"g", 1, []string{"chat.message"}, 2, []int64{3, 5}},
		{"g", 0, []string{"chat.ack", "system.notify"}, 0, []int64{2, 4}},
		{"g", 0, []string{"x.unknown"}, 0, nil},
		{"g", -5, nil, 1, []int64{1}},
		{"h", 0, nil, 0, []int64{1}},
		{"nope", 0, nil, 0, nil},
	}
	for _, tt := range tests {
		name := fmt.Sprintf("%s,%d,%v,%d", tt.group, tt.since, tt.kinds, tt.limit)
		t.Run(name, func(t *testing.T) {
			evs, err := s.Range(testContext(t), tt.group, tt.since, tt.kinds, tt.limit)
			if err != nil {
				t.Fatalf("Range(%s) error = %v", name, err)
			}
			if got := seqs(evs); !slices.Equal(got, tt.want) && (len(got) > 0 || len(tt.want) > 0) {
				t.Errorf("Range(%s) seqs = %v, want %v", name, got, tt.want)
			}
			for _, ev := range evs {
				if ev.GroupID != tt.group || (len(tt.kinds) > 0 && !slices.Contains(tt.kinds, ev.Kind)) {
					t.Errorf("Range(%s) returned %s/%d kind %s", name, ev.GroupID, ev.Seq, ev.Kind)
				}
			}
		})
	}
}

func testGroups(t *testing.T, s ledger.Store) {
	ctx := testContext(t)
	gs, err := s.Groups(ctx)
	if err != nil || len(gs) != 0 {
		t.Errorf("Groups() on empty store = %v, %v, want none", gs, err)
	}
	for _, g := range []string{"zeta", "alpha", "zeta", "mid", "zeta"} {
		appendOne(t, s, rec(g, "chat.message", ""))
	}
	gs, err = s.Groups(ctx)
	want := []ledger.Group{{ID: "alpha", LastSeq: 1}, {ID: "mid", LastSeq: 1}, {ID: "zeta", LastSeq: 3}}
	if err != nil || !slices.Equal(gs, want) {
		t.Errorf("Groups() = %v, %v, want %v", gs, err, want)
	}
}

// follow collects events from s.Follow until it has n of them.
func follow(ctx context.Context, s ledger.Store, group string, since int64, n int) ([]ledger.Event, error) {
	var got []ledger.Event
	if n == 0 {
		return nil, nil
	}
	for ev, err := range s.Follow(ctx, group, since) {
		if err != nil {
			return got, err
		}
		got = append(got, ev)
		if len(got) == n {
			return got, nil
		}
	}
	return got, fmt.Errorf("follow ended after %d events: %w", len(got), ctx.Err())
}

func testFollowReplayAndLive(t *testing.T, s ledger.Store) {
	ctx := testContext(t)
	for range 5 {
		appendOne(t, s, rec("g", "chat.message", ""))
	}
	const live = 40
	total := int64(5 + live)
	starts := []int64{0, 2, 5, 30}
	type result struct {
		since int64
		evs   []ledger.Event
		err   error
	}
	out := make(chan result, len(starts))
	for _, since := range starts {
		go func() {
			evs, err := follow(ctx, s, "g", since, int(total-since))
			out <- result{since, evs, err}
		}()
	}
	// Live appends from several goroutines, plus noise in another group.
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range live / 4 {
				if _, err := s.Append(ctx, []ledger.Record{rec("g", "chat.message", ""), rec("other", "chat.message", "")}); err != nil {
					t.Errorf("Append() error = %v", err)
					return
				}
				if i%3 == w%3 {
					time.Sleep(time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	for range starts {
		r := <-out
		if r.err != nil {
			t.Errorf("Follow(g, %d) error = %v", r.since, r.err)
			continue
		}
		if got, want := seqs(r.evs), denseFrom(r.since+1, total-r.since); !slices.Equal(got, want) {
			t.Errorf("Follow(g, %d) seqs = %v, want %v", r.since, got, want)
		}
		for _, ev := range r.evs {
			if ev.GroupID != "g" {
				t.Errorf("Follow(g, %d) yielded an event of group %q", r.since, ev.GroupID)
			}
		}
	}
}

// testLog checks that Log reads every group's events in append order
// with growing positions, in pages that join without gaps or repeats.
func testLog(t *testing.T, s ledger.Store) {
	ctx := testContext(t)
	var want []string
	var reported []ledger.Result // results that carry a position
	for i := range 13 {
		res, err := s.Append(ctx, []ledger.Record{rec(fmt.Sprintf("g%d", i%3), "chat.message", ""), rec("h", "chat.message", "")})
		if err != nil {
			t.Fatalf("Append() error = %v", err)
		}
		want = append(want, res[0].Event.ID, res[1].Event.ID)
		for _, r := range res {
			if r.Pos != 0 {
				reported = append(reported, r)
			}
		}
	}
	all, err := s.Log(ctx, 0, 1000)
	if err != nil {
		t.Fatalf("Log(0, 1000) error = %v", err)
	}
	// A store that reports positions on append reports every new event's,
	// as Log has it, densely (ledger.Result.Pos).
	if len(reported) > 0 {
		if len(reported) != len(all) {
			t.Fatalf("Append reported the position of %d events of %d", len(reported), len(all))
		}
		for i, r := range reported {
			if r.Pos != all[i].Pos || r.Event.ID != all[i].ID {
				t.Fatalf("Append result %d = %s at %d, Log has %s at %d", i, r.Event.ID, r.Pos, all[i].ID, all[i].Pos)
			}
			if i > 0 && r.Pos != reported[i-1].Pos+1 {
				t.Fatalf("Append positions %d then %d, want dense", reported[i-1].Pos, r.Pos)
			}
		}
		dup := appendOne(t, s, rec("h", "chat.message", "log-dup"))
		again := appendOne(t, s, rec("h", "chat.message", "log-dup"))
		if dup.Pos != all[len(all)-1].Pos+1 || !again.Duplicate || again.Pos != 0 {
			t.Fatalf("Append positions of a new event and its duplicate = %d, %d (duplicate %v); want %d, 0", dup.Pos, again.Pos, again.Duplicate, all[len(all)-1].Pos+1)
		}
		if all, err = s.Log(ctx, 0, 1000); err != nil {
			t.Fatalf("Log(0, 1000) error = %v", err)
		}
		want = append(want, dup.Event.ID)
	}
	ids := func(ls []ledger.Logged) []string {
		out := make([]string, len(ls))
		for i, l := range ls {
			out[i] = l.ID
		}
		return out
	}
	if got := ids(all); !slices.Equal(got, want) {
		t.Fatalf("Log(0, 1000) ids = %v, want the append order %v", got, want)
	}
	for i, l := range all {
		if l.Pos <= 0 || i > 0 && l.Pos <= all[i-1].Pos {
			t.Fatalf("Log(0, 1000)[%d].Pos = %d after %d, want positive and growing", i, l.Pos, all[max(i-1, 0)].Pos)
		}
	}
	for _, page := range []int{1, 4, 7} {
		var got []ledger.Logged
		for after := int64(0); ; {
			p, err := s.Log(ctx, after, page)
			if err != nil {
				t.Fatalf("Log(%d, %d) error = %v", after, page, err)
			}
			if len(p) > page {
				t.Fatalf("Log(%d, %d) = %d events, more than the limit", after, page, len(p))
			}
			if len(p) == 0 {
				break
			}
			got = append(got, p...)
			after = p[len(p)-1].Pos
		}
		if !slices.Equal(ids(got), want) {
			t.Errorf("Log in pages of %d = %v, want %v", page, ids(got), want)
		}
	}
	if p, err := s.Log(ctx, all[len(all)-1].Pos, 10); err != nil || len(p) != 0 {
		t.Errorf("Log(after the last) = %d events, %v; want none", len(p), err)
	}
	if p, err := s.Log(ctx, all[4].Pos, 2); err != nil || !slices.Equal(ids(p), want[5:7]) {
		t.Errorf("Log(after the 5th, 2) = %v, %v; want %v", ids(p), err, want[5:7])
	}
	if _, err := s.Log(ctx, 0, 0); !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("Log(0, 0) error = %v, want ErrInvalid", err)
	}
	testLogBefore(t, s, all)
}

// testLogBefore checks LogBefore against the whole log all: pages of any
// size, chained by their last position, give the log newest first.
func testLogBefore(t *testing.T, s ledger.Store, all []ledger.Logged) {
	ctx := testContext(t)
	want := make([]string, len(all))
	for i, l := range all {
		want[len(all)-1-i] = l.ID
	}
	for _, page := range []int{1, 5, 1000} {
		var got []string
		var prev int64
		for before := int64(0); ; {
			p, err := s.LogBefore(ctx, before, page)
			if err != nil {
				t.Fatalf("LogBefore(%d, %d) error = %v", before, page, err)
			}
			if len(p) > page {
				t.Fatalf("LogBefore(%d, %d) = %d events, more than the limit", before, page, len(p))
			}
			if len(p) == 0 {
				break
			}
			for _, l := range p {
				if prev != 0 && l.Pos >= prev {
					t.Fatalf("LogBefore(%d, %d): position %d after %d, want falling", before, page, l.Pos, prev)
				}
				prev = l.Pos
				got = append(got, l.ID)
			}
			before = p[len(p)-1].Pos
		}
		if !slices.Equal(got, want) {
			t.Errorf("LogBefore in pages of %d = %v, want the log newest first %v", page, got, want)
		}
	}
	if p, err := s.LogBefore(ctx, all[0].Pos, 10); err != nil || len(p) != 0 {
		t.Errorf("LogBefore(the first) = %d events, %v; want none", len(p), err)
	}
	if p, err := s.LogBefore(ctx, all[7].Pos, 2); err != nil || len(p) != 2 || p[0].ID != all[6].ID || p[1].ID != all[5].ID || p[0].Pos != all[6].Pos {
		t.Errorf("LogBefore(the 8th, 2) = %v, %v; want the 7th and 6th", p, err)
	}
	if _, err := s.LogBefore(ctx, 0, 0); !errors.Is(err, ledger.ErrInvalid) {
		t.Errorf("LogBefore(0, 0) error = %v, want ErrInvalid", err)
	}
}

// testFollowLog checks that FollowLog replays the log after a position and
// then yields live appends to any group, in order, without gaps.
func testFollowLog(t *testing.T, s ledger.Store) {
	ctx := testContext(t)
	for i := range 5 {
		appendOne(t, s, rec(fmt.Sprintf("g%d", i), "chat.message", ""))
	}
	stored, err := s.Log(ctx, 0, 100)
	if err != nil || len(stored) != 5 {
		t.Fatalf("Log() = %d events, %v; want 5", len(stored), err)
	}
	const live = 40
	type result struct {
		after int64
		got   []ledger.Logged
		err   error
	}
	starts := []int64{0, stored[1].Pos, stored[4].Pos}
	want := map[int64]int{0: 5 + live, stored[1].Pos: 3 + live, stored[4].Pos: live}
	out := make(chan result, len(starts))
	for _, after := range starts {
		go func() {
			r := result{after: after}
			for l, err := range s.FollowLog(ctx, after) {
				if err != nil {
					r.err = err
					break
				}
				r.got = append(r.got, l)
				if len(r.got) == want[after] {
					break
				}
			}
			out <- r
		}()
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for range live / 4 {
				if _, err := s.Append(ctx, []ledger.Record{rec(fmt.Sprintf("live%d", w), "chat.message", "")}); err != nil {
					t.Errorf("Append() error = %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	all, err := s.Log(ctx, 0, 1000)
	if err != nil {
		t.Fatalf("Log() error = %v", err)
	}
	for range starts {
		r := <-out
		if r.err != nil || len(r.got) != want[r.after] {
			t.Errorf("FollowLog(%d) = %d events, %v; want %d", r.after, len(r.got), r.err, want[r.after])
			continue
		}
		tail := all[len(all)-want[r.after]:]
		for i := range tail {
			if r.got[i].Pos != tail[i].Pos || r.got[i].ID != tail[i].ID {
				t.Errorf("FollowLog(%d)[%d] = %d %s, want %d %s (Log's order)", r.after, i, r.got[i].Pos, r.got[i].ID, tail[i].Pos, tail[i].ID)
				break
			}
		}
	}
}

func testFollowSlow(t *testing.T, s ledger.Store) {
	ctx := testContext(t)
	appendOne(t, s, rec("g", "chat.message", ""))
	stalled := make(chan struct{})
	resume := make(chan struct{})
	var got []ledger.Event
	var ferr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev, err := range s.Follow(ctx, "g", 0) {
			if err != nil {
				ferr = err
				return
			}
			got = append(got, ev)
			if len(got) == 1 {
				close(stalled)
				<-resume // a follower that stops reading
			}
			if len(got) == 101 {
				return
			}
		}
	}()
	<-stalled
	// Appends must complete while the follower is stuck.
	for range 20 {
		recs := make([]ledger.Record, 5)
		for i := range recs {
			recs[i] = rec("g", "chat.message", "")
		}
		if _, err := s.Append(ctx, recs); err != nil {
			t.Fatalf("Append() with a stalled follower error = %v", err)
		}
	}
	close(resume)
	<-done
	if ferr != nil {
		t.Fatalf("Follow(g, 0) error = %v", ferr)
	}
	if want := denseFrom(1, 101); !slices.Equal(seqs(got), want) {
		t.Errorf("Follow(g, 0) after stall seqs = %v, want %v", seqs(got), want)
	}
}

func testFollowCancel(t *testing.T, s ledger.Store) {
	appendOne(t, s, rec("g", "chat.message", ""))
	ctx, cancel := context.WithCancel(testContext(t))
	var n int
	done := make(chan error, 1)
	go func() {
		for _, err := range s.Follow(ctx, "g", 0) {
			if err != nil {
				done <- err
				return
			}
			n++
			if n == 1 {
				cancel() // then wait: the sequence must end
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Follow(g, 0) after cancel yielded error %v, want none", err)
		}
	case <-time.After(waitLimit):
		t.Fatalf("Follow(g, 0) did not end after its context was cancelled")
	}
	if n != 1 {
		t.Errorf("Follow(g, 0) yielded %d events, want 1", n)
	}
	// Breaking out of the loop early must also be fine.
	for range s.Follow(testContext(t), "g", 0) {
		break
	}
}

func testFollowClose(t *testing.T, s ledger.Store) {
	ctx := testContext(t)
	waiting := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for ev, err := range s.Follow(ctx, "g", 0) {
			if err != nil {
				done <- err
				return
			}
			if ev.Seq == 1 {
				close(waiting)
			}
		}
		done <- nil
	}()
	appendOne(t, s, rec("g", "chat.message", ""))
	<-waiting
	if err := s.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ledger.ErrClosed) {
			t.Errorf("Follow(g, 0) after Close ended with %v, want ErrClosed", err)
		}
	case <-time.After(waitLimit):
		t.Fatalf("Follow(g, 0) did not end after Close")
	}
}

func testCursors(t *testing.T, s ledger.Store) {
	ctx := testContext(t)
	var g []ledger.Event
	for range 4 {
		g = append(g, appendOne(t, s, rec("g", "chat.message", "")).Event)
	}
	h := appendOne(t, s, rec("h", "chat.message", "")).Event

	if _, err := s.GetCursor(ctx, "g", "alice"); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("GetCursor(g, alice) before any set error = %v, want ErrNotFound", err)
	}
	steps := []struct {
		group, actor, event string
		wantSeq             int64
		wantErr             error
	}{
		{"g", "alice", g[2].ID, 3, nil},
		{"g", "bob", g[0].ID, 1, nil},
		{"g", "alice", g[3].ID, 4, nil},
		{"g", "alice", g[1].ID, 2, nil}, // a cursor may move back
		{"h", "alice", h.ID, 1, nil},
		{"g", "alice", h.ID, 0, ledger.ErrNotFound}, // event of another group
		{"g", "alice", envelope.NewID(), 0, ledger.ErrNotFound},
	}
	for _, st := range steps {
		c, err := s.SetCursor(ctx, st.group, st.actor, st.event)
		if st.wantErr != nil {
			if !errors.Is(err, st.wantErr) {
				t.Errorf("SetCursor(%s, %s, %s) error = %v, want %v", st.group, st.actor, st.event, err, st.wantErr)
			}
			continue
		}
		want := ledger.Cursor{GroupID: st.group, Actor: st.actor, EventID: st.event, Seq: st.wantSeq}
		if err != nil || c != want {
			t.Errorf("SetCursor(%s, %s, %s) = %+v, %v, want %+v", st.group, st.actor, st.event, c, err, want)
		}
	}
	final := []ledger.Cursor{
		{GroupID: "g", Actor: "alice", EventID: g[1].ID, Seq: 2},
		{GroupID: "g", Actor: "bob", EventID: g[0].ID, Seq: 1},
		{GroupID: "h", Actor: "alice", EventID: h.ID, Seq: 1},
	}
	for _, want := range final {
		c, err := s.GetCursor(ctx, want.GroupID, want.Actor)
		if err != nil || c != want {
			t.Errorf("GetCursor(%s, %s) = %+v, %v, want %+v", want.GroupID, want.Actor, c, err, want)
		}
	}
	if _, err := s.GetCursor(ctx, "h", "bob"); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("GetCursor(h, bob) error = %v, want ErrNotFound", err)
	}
}

// testCursorsOf checks that a CursorLister's CursorsOf, and CursorsIn on
// any Store, give what GetCursor of each group gives: many groups,
// actors whose names differ only by case or a space, an actor with no
// cursor, and a mark named like an actor.
func testCursorsOf(t *testing.T, s ledger.Store) {
	ctx := testContext(t)
	const groups = 60
	var ids []string
	for i := range groups {
		id := fmt.Sprintf("g%02d", i)
		ids = append(ids, id)
		ev := appendOne(t, s, rec(id, "chat.message", "")).Event
		// alice in every second group, Alice in every third, "alice "
		// in group 7 only, bob in none.
		for _, a := range []struct {
			actor string
			in    bool
		}{{"alice", i%2 == 0}, {"Alice", i%3 == 0}, {"alice ", i == 7}} {
			if !a.in {
				continue
			}
			if _, err := s.SetCursor(ctx, id, a.actor, ev.ID); err != nil {
				t.Fatalf("SetCursor(%s, %q): %v", id, a.actor, err)
			}
		}
	}
	if err := s.SetMark(ctx, "alice", ledger.Mark{EventID: "x", Pos: 1}); err != nil {
		t.Fatalf("SetMark(alice): %v", err)
	}
	perGroup := func(actor string, groups []string) map[string]ledger.Cursor {
		out := map[string]ledger.Cursor{}
		for _, g := range groups {
			c, err := s.GetCursor(ctx, g, actor)
			if errors.Is(err, ledger.ErrNotFound) {
				continue
			}
			if err != nil {
				t.Fatalf("GetCursor(%s, %q): %v", g, actor, err)
			}
			out[g] = c
		}
		return out
	}
	cl, lister := s.(ledger.CursorLister)
	for _, actor := range []string{"alice", "Alice", "alice ", "ALICE", "bob", ""} {
		want := perGroup(actor, ids)
		if lister {
			got, err := cl.CursorsOf(ctx, actor)
			if err != nil || !maps.Equal(got, want) {
				t.Errorf("CursorsOf(%q) = %v, %v; want GetCursor's %v", actor, got, err, want)
			}
		}
		// A subset of the groups, with one that does not exist.
		some := append(slices.Clone(ids[:groups/2]), "nosuch")
		got, err := ledger.CursorsIn(ctx, s, actor, some)
		if want := perGroup(actor, some); err != nil || !maps.Equal(got, want) {
			t.Errorf("CursorsIn(%q, first half) = %v, %v; want GetCursor's %v", actor, got, err, want)
		}
	}
}

func testAdvanceCursor(t *testing.T, s ledger.Store) {
	ctx := testContext(t)
	var g []ledger.Event
	for range 4 {
		g = append(g, appendOne(t, s, rec("g", "chat.message", "")).Event)
	}
	h := appendOne(t, s, rec("h", "chat.message", "")).Event
	steps := []struct {
		event   string
		want    int // index in g of where the cursor stands after
		wantErr error
	}{
		{g[1].ID, 1, nil},
		{g[3].ID, 3, nil},
		{g[0].ID, 3, nil}, // never back
		{g[3].ID, 3, nil},
		{h.ID, 3, ledger.ErrNotFound}, // event of another group
		{envelope.NewID(), 3, ledger.ErrNotFound},
		{"", 3, ledger.ErrInvalid},
	}
	for _, st := range steps {
		c, err := s.AdvanceCursor(ctx, "g", "alice", st.event)
		if st.wantErr != nil {
			if !errors.Is(err, st.wantErr) {
				t.Errorf("AdvanceCursor(g, alice, %q) error = %v, want %v", st.event, err, st.wantErr)
			}
		} else if want := (ledger.Cursor{GroupID: "g", Actor: "alice", EventID: g[st.want].ID, Seq: g[st.want].Seq}); err != nil || c != want {
			t.Errorf("AdvanceCursor(g, alice, %s) = %+v, %v, want %+v", st.event, c, err, want)
		}
		if c, err := s.GetCursor(ctx, "g", "alice"); err != nil || c.EventID != g[st.want].ID {
			t.Errorf("after AdvanceCursor(g, alice, %q): GetCursor = %+v, %v, want event %d", st.event, c, err, st.want+1)
		}
	}
	// A cursor SetCursor moved back is advanced from where it stands.
	if _, err := s.SetCursor(ctx, "g", "alice", g[0].ID); err != nil {
		t.Fatal(err)
	}
	if c, err := s.AdvanceCursor(ctx, "g", "alice", g[2].ID); err != nil || c.Seq != g[2].Seq {
		t.Errorf("AdvanceCursor after a move back = %+v, %v, want seq %d", c, err, g[2].Seq)
	}
}

// testAdvanceCursorConcurrent advances one cursor from many goroutines at
// once, each to its own event: the cursor must end at the last event
// whatever the interleaving, and no call may report a cursor behind its
// own event.
func testAdvanceCursorConcurrent(t *testing.T, s ledger.Store) {
	ctx := testContext(t)
	const n = 24
	var evs []ledger.Event
	for range n {
		evs = append(evs, appendOne(t, s, rec("g", "chat.message", "")).Event)
	}
	var wg sync.WaitGroup
	for _, i := range rand.Perm(n) {
		wg.Go(func() {
			c, err := s.AdvanceCursor(ctx, "g", "bob", evs[i].ID)
			if err != nil || c.Seq < evs[i].Seq {
				t.Errorf("AdvanceCursor(g, bob, event %d) = %+v, %v, want at or past seq %d", i+1, c, err, evs[i].Seq)
			}
		})
	}
	wg.Wait()
	if c, err := s.GetCursor(ctx, "g", "bob"); err != nil || c.EventID != evs[n-1].ID || c.Seq != evs[n-1].Seq {
		t.Errorf("GetCursor(g, bob) after concurrent advances = %+v, %v, want the last event (seq %d)", c, err, evs[n-1].Seq)
	}
}

// testMarks checks that marks are kept by name, overwritten, and apart
// from the cursors (a store may keep them in the same place).
func testMarks(t *testing.T, s ledger.Store) {
	ctx := testContext(t)
	ev := appendOne(t, s, rec("g", "chat.message", "")).Event
	if _, err := s.GetMark(ctx, "outbound"); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("GetMark(outbound) before any set error = %v, want ErrNotFound", err)
	}
	for _, bad := range []struct {
		name string
		m    ledger.Mark
	}{{"", ledger.Mark{Pos: 1, EventID: ev.ID}}, {"outbound", ledger.Mark{Pos: -1}}} {
		if err := s.SetMark(ctx, bad.name, bad.m); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("SetMark(%q, %+v) error = %v, want ErrInvalid", bad.name, bad.m, err)
		}
	}
	steps := []struct {
		name string
		m    ledger.Mark
	}{
		{"outbound", ledger.Mark{Pos: 7, EventID: ev.ID}},
		{"other", ledger.Mark{Pos: 1 << 40, EventID: "x"}},
		{"outbound", ledger.Mark{Pos: 9, EventID: "y"}},
		{"outbound", ledger.Mark{Pos: 2, EventID: "z"}}, // a mark may move back
		{"with space/and.dots", ledger.Mark{}},
	}
	for _, st := range steps {
		if err := s.SetMark(ctx, st.name, st.m); err != nil {
			t.Errorf("SetMark(%q, %+v) error = %v", st.name, st.m, err)
		}
	}
	for name, want := range map[string]ledger.Mark{
		"outbound":            {Pos: 2, EventID: "z"},
		"other":               {Pos: 1 << 40, EventID: "x"},
		"with space/and.dots": {},
	} {
		if m, err := s.GetMark(ctx, name); err != nil || m != want {
			t.Errorf("GetMark(%q) = %+v, %v, want %+v", name, m, err, want)
		}
	}
	if _, err := s.GetCursor(ctx, "g", "outbound"); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("GetCursor(g, outbound) after SetMark(outbound) error = %v, want ErrNotFound", err)
	}
	if _, err := s.SetCursor(ctx, "g", "outbound", ev.ID); err != nil {
		t.Fatalf("SetCursor(g, outbound) error = %v", err)
	}
	if m, err := s.GetMark(ctx, "outbound"); err != nil || m != (ledger.Mark{Pos: 2, EventID: "z"}) {
		t.Errorf("GetMark(outbound) after SetCursor(g, outbound) = %+v, %v, want it unchanged", m, err)
	}
}

func testClaims(t *testing.T, s ledger.Store) {
	ctx := testContext(t)
	ev := appendOne(t, s, rec("g", "chat.message", "")).Event
	other := appendOne(t, s, rec("g", "chat.message", "")).Event
	t0 := time.Date(2026, 1, 13, 10, 0, 0, 0, time.UTC)
	ttl := 10 * time.Minute
	at := func(d time.Duration) time.Time { return t0.Add(d) }

	steps := []struct {
		name      string
		do        string // claim, release, get
		event     string
		actor     string
		ttl       time.Duration
		now       time.Time
		wantActor string // holder returned (also with ErrClaimed)
		wantSince time.Time
		wantUntil time.Time
		wantErr   error
	}{
		{"get unclaimed", "get", ev.ID, "", 0, at(0), "", time.Time{}, time.Time{}, ledger.ErrNotFound},
		{"first wins", "claim", ev.ID, "alice", ttl, at(0), "alice", at(0), at(ttl), nil},
		{"other refused", "claim", ev.ID, "bob", ttl, at(time.Minute), "alice", at(0), at(ttl), ledger.ErrClaimed},
		{"get held", "get", ev.ID, "", 0, at(time.Minute), "alice", at(0), at(ttl), nil},
		{"renew extends", "claim", ev.ID, "alice", ttl, at(5 * time.Minute), "alice", at(0), at(5*time.Minute + ttl), nil},
		{"other still refused", "claim", ev.ID, "bob", ttl, at(12 * time.Minute), "alice", at(0), at(5*time.Minute + ttl), ledger.ErrClaimed},
		{"get after expiry", "get", ev.ID, "", 0, at(15 * time.Minute), "", time.Time{}, time.Time{}, ledger.ErrNotFound},
		{"takeover after expiry", "claim", ev.ID, "bob", ttl, at(15 * time.Minute), "bob", at(15 * time.Minute), at(15*time.Minute + ttl), nil},
		{"old holder refused", "claim", ev.ID, "alice", ttl, at(16 * time.Minute), "bob", at(15 * time.Minute), at(15*time.Minute + ttl), ledger.ErrClaimed},
		{"release by other", "release", ev.ID, "alice", 0, time.Time{}, "", time.Time{}, time.Time{}, ledger.ErrClaimed},
		{"release by holder", "release", ev.ID, "bob", 0, time.Time{}, "", time.Time{}, time.Time{}, nil},
		{"release again", "release", ev.ID, "bob", 0, time.Time{}, "", time.Time{}, time.Time{}, ledger.ErrNotFound},
		{"get released", "get", ev.ID, "", 0, at(16 * time.Minute), "", time.Time{}, time.Time{}, ledger.ErrNotFound},
		{"claim after release", "claim", ev.ID, "alice", ttl, at(17 * time.Minute), "alice", at(17 * time.Minute), at(17*time.Minute + ttl), nil},
		{"claims are per event", "claim", other.ID, "bob", ttl, at(17 * time.Minute), "bob", at(17 * time.Minute), at(17*time.Minute + ttl), nil},
		{"unknown event", "claim", envelope.NewID(), "alice", ttl, at(0), "", time.Time{}, time.Time{}, ledger.ErrNotFound},
		{"zero ttl", "claim", ev.ID, "alice", 0, at(0), "", time.Time{}, time.Time{}, ledger.ErrInvalid},
		{"zero now", "claim", ev.ID, "alice", ttl, time.Time{}, "", time.Time{}, time.Time{}, ledger.ErrInvalid},
	}
	for _, st := range steps {
		var (
			c   ledger.Claim
			err error
		)
		in := fmt.Sprintf("g, %s, %s", st.event, st.actor)
		switch st.do {
		case "claim":
			in = fmt.Sprintf("g, %s, %s, %v, %s", st.event, st.actor, st.ttl, st.now.Format(time.TimeOnly))
			c, err = s.Claim(ctx, "g", st.event, st.actor, st.ttl, st.now)
		case "release":
			err = s.ReleaseClaim(ctx, "g", st.event, st.actor)
		case "get":
			in = fmt.Sprintf("g, %s, %s", st.event, st.now.Format(time.TimeOnly))
			c, err = s.GetClaim(ctx, "g", st.event, st.now)
		}
		fn := map[string]string{"claim": "Claim", "release": "ReleaseClaim", "get": "GetClaim"}[st.do]
		if !errors.Is(err, st.wantErr) || (st.wantErr == nil && err != nil) {
			t.Errorf("%s: %s(%s) error = %v, want %v", st.name, fn, in, err, st.wantErr)
			continue
		}
		if st.wantActor == "" {
			continue
		}
		want := ledger.Claim{GroupID: "g", EventID: st.event, Actor: st.wantActor, ClaimedAt: st.wantSince, ExpiresAt: st.wantUntil}
		if c.GroupID != want.GroupID || c.EventID != want.EventID || c.Actor != want.Actor ||
			!c.ClaimedAt.Equal(want.ClaimedAt) || !c.ExpiresAt.Equal(want.ExpiresAt) {
			t.Errorf("%s: %s(%s) = %+v, want %+v", st.name, fn, in, c, want)
		}
	}
}

// testReleaseClaimAsRead checks that ReleaseClaimAsRead drops a claim
// only as it was read: not once its holder renewed it, nor once another
// actor took it over.
func testReleaseClaimAsRead(t *testing.T, s ledger.Store) {
	ctx := testContext(t)
	ev := appendOne(t, s, rec("g", "chat.message", "")).Event
	t0 := time.Date(2026, 1, 13, 10, 0, 0, 0, time.UTC)
	read, err := s.Claim(ctx, "g", ev.ID, "alice", time.Minute, t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(ctx, "g", ev.ID, "alice", time.Minute, t0.Add(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := s.ReleaseClaimAsRead(ctx, read); !errors.Is(err, ledger.ErrClaimed) {
		t.Fatalf("ReleaseClaimAsRead(claim renewed since) error = %v, want ErrClaimed", err)
	}
	renewed, err := s.GetClaim(ctx, "g", ev.ID, t0.Add(time.Minute))
	if err != nil || renewed.Actor != "alice" {
		t.Fatalf("GetClaim after a refused release = %+v, %v; want alice's renewal", renewed, err)
	}
	if err := s.ReleaseClaimAsRead(ctx, renewed); err != nil {
		t.Fatalf("ReleaseClaimAsRead(claim as read) error = %v", err)
	}
	if err := s.ReleaseClaimAsRead(ctx, renewed); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("ReleaseClaimAsRead(released) error = %v, want ErrNotFound", err)
	}
	if _, err := s.Claim(ctx, "g", ev.ID, "bob", time.Minute, t0.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	taken := renewed
	taken.Actor = "carol"
	if err := s.ReleaseClaimAsRead(ctx, taken); !errors.Is(err, ledger.ErrClaimed) {
		t.Fatalf("ReleaseClaimAsRead(another actor's claim) error = %v, want ErrClaimed", err)
	}
	if c, err := s.GetClaim(ctx, "g", ev.ID, t0.Add(2*time.Minute)); err != nil || c.Actor != "bob" {
		t.Fatalf("GetClaim = %+v, %v; want bob's", c, err)
	}
}

func testClaimsConcurrent(t *testing.T, s ledger.Store) {
	ctx := testContext(t)
	ev := appendOne(t, s, rec("g", "chat.message", "")).Event
	now := time.Now()
	const n = 16
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, errs[i] = s.Claim(ctx, "g", ev.ID, fmt.Sprintf("agent-%d", i), time.Minute, now)
		})
	}
	wg.Wait()
	winners := 0
	for i, err := range errs {
		switch {
		case err == nil:
			winners++
		case !errors.Is(err, ledger.ErrClaimed):
			t.Errorf("Claim(agent-%d) error = %v, want nil or ErrClaimed", i, err)
		}
	}
	if winners != 1 {
		t.Errorf("concurrent Claim: %d winners, want 1", winners)
	}
}

// fill appends a mixed workload to s and returns every event by group.
func fill(t *testing.T, s ledger.Store) map[string][]ledger.Event {
	t.Helper()
	out := make(map[string][]ledger.Event)
	groups := []string{"beta", "alpha", "gamma"}
	for i := range 30 {
		g := groups[i%len(groups)]
		key := ""
		if i%2 == 0 {
			key = fmt.Sprintf("msg-%d", i)
		}
		r := rec(g, "chat.message", key)
		r.ScopeKey = []string{"", "s_abc"}[i%2]
		r.Data = json.RawMessage(fmt.Sprintf(`{"text":"line %d\nwith \"quotes\" and <html> & unicode ✓","n":%d}`, i, i))
		ev := appendOne(t, s, r).Event
		out[g] = append(out[g], ev)
	}
	return out
}

func testExportImport(t *testing.T, s ledger.Store) {
	ctx := testContext(t)
	want := fill(t, s)
	var buf bytes.Buffer
	if err := ledger.Export(ctx, s, &buf); err != nil {
		t.Fatalf("Export() error = %v", err)
	}
	exported := buf.String()
	lines := strings.Split(strings.TrimSuffix(exported, "\n"), "\n")
	if len(lines) != 30 {
		t.Fatalf("Export() wrote %d lines, want 30", len(lines))
	}
	// Order (group, seq), and every line a CCCS event.
	var prevGroup string
	var prevSeq int64
	for i, l := range lines {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("Export() line %d = %q: %v", i+1, l, err)
		}
		for _, k := range []string{"v", "id", "ts", "seq", "kind", "group_id", "scope_key", "by", "data"} {
			if _, ok := m[k]; !ok {
				t.Errorf("Export() line %d lacks %q: %s", i+1, k, l)
			}
		}
		var ev ledger.Event
		json.Unmarshal([]byte(l), &ev)
		if ev.GroupID < prevGroup || ev.GroupID == prevGroup && ev.Seq != prevSeq+1 || ev.GroupID != prevGroup && ev.Seq != 1 {
			t.Errorf("Export() line %d is %s/%d after %s/%d, want (group, seq) order", i+1, ev.GroupID, ev.Seq, prevGroup, prevSeq)
		}
		prevGroup, prevSeq = ev.GroupID, ev.Seq
	}

	t.Run("reimport", func(t *testing.T) {
		// Importing a store's own export skips every event.
		n, err := ledger.Import(ctx, s, strings.NewReader(exported))
		if err != nil || n != 30 {
			t.Fatalf("Import(export) into the same store = %d, %v, want 30, nil (identical events are skipped)", n, err)
		}
		for g, evs := range want {
			checkEvents(t, "Range("+g+") after re-import", rangeAll(t, s, g), evs)
		}
	})
}

// testExportImportTwo checks an export/import round trip between two
// Stores: events, ids, ts, seq and dedupe keys preserved, idempotency
// intact.
func testExportImportTwo(t *testing.T, src, dst ledger.Store) {
	ctx := testContext(t)
	want := fill(t, src)
	var buf bytes.Buffer
	if err := ledger.Export(ctx, src, &buf); err != nil {
		t.Fatalf("Export() error = %v", err)
	}
	exported := buf.String()
	n, err := ledger.Import(ctx, dst, strings.NewReader(exported))
	if err != nil || n != 30 {
		t.Fatalf("Import(export) = %d, %v, want 30, nil", n, err)
	}
	for g, evs := range want {
		checkEvents(t, "Range("+g+") after import", rangeAll(t, dst, g), evs)
	}
	wantGroups, _ := src.Groups(ctx)
	if gs, err := dst.Groups(ctx); err != nil || !slices.Equal(gs, wantGroups) {
		t.Errorf("Groups() after import = %v, %v, want %v", gs, err, wantGroups)
	}
	// Idempotency survives the round trip.
	var first ledger.Event
	for _, ev := range want["alpha"] {
		if ev.DedupeKey != "" {
			first = ev
			break
		}
	}
	res := appendOne(t, dst, rec("alpha", "chat.message", first.DedupeKey))
	if !res.Duplicate || res.Event.ID != first.ID {
		t.Errorf("Append(%s) after import = %s duplicate %v, want %s duplicate true", first.DedupeKey, res.Event.ID, res.Duplicate, first.ID)
	}
	// Appends continue the imported seqs.
	if res := appendOne(t, dst, rec("alpha", "chat.message", "")); res.Event.Seq != int64(len(want["alpha"])+1) {
		t.Errorf("Append(new) after import seq = %d, want %d", res.Event.Seq, len(want["alpha"])+1)
	}
	// A second import changes nothing.
	if n, err := ledger.Import(ctx, dst, strings.NewReader(exported)); err != nil || n != 30 {
		t.Errorf("Import(export) again = %d, %v, want 30, nil", n, err)
	}
	// Export of the source is stable.
	var again bytes.Buffer
	if err := ledger.Export(ctx, src, &again); err != nil || again.String() != exported {
		t.Errorf("Export() twice differs (err %v)", err)
	}
}

func testImportBadLines(t *testing.T, s ledger.Store) {
	ctx := testContext(t)
	ev := func(seq int64, id string) string {
		return fmt.Sprintf(`{"v":1,"id":%q,"ts":"2026-01-13T10:00:00Z","seq":%d,"kind":"chat.message","group_id":"g","scope_key":"","by":"user","data":{"text":"x"}}`, id, seq)
	}
	id1, id2, id3 := envelope.NewID(), envelope.NewID(), envelope.NewID()
	tests := []struct {
		name     string
		in       string
		wantN    int
		wantLine string
		wantErr  error
	}{
		{"broken json", ev(1, id1) + "\n\n{\"v\":1,\n", 1, "line 3", nil},
		{"seq gap", ev(1, id1) + "\n" + ev(3, id2) + "\n", 1, "line 2", ledger.ErrConflict},
		{"same id other content", ev(1, id1) + "\n" + strings.Replace(ev(1, id1), `"x"`, `"y"`, 1) + "\n", 1, "line 2", ledger.ErrConflict},
		{"version 2", ev(1, id1) + "\n" + strings.Replace(ev(2, id3), `"v":1`, `"v":2`, 1) + "\n", 1, "line 2", ledger.ErrInvalid},
		{"data not object", ev(1, id1) + "\n" + strings.Replace(ev(2, id3), `{"text":"x"}`, `[]`, 1) + "\n", 1, "line 2", ledger.ErrInvalid},
		{"bad ts", ev(1, id1) + "\n" + strings.Replace(ev(2, id3), `2026-01-13T10:00:00Z`, `yesterday`, 1) + "\n", 1, "line 2", ledger.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := ledger.Import(ctx, s, strings.NewReader(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.wantLine) || !strings.HasPrefix(err.Error(), "ledger: ") {
				t.Errorf("Import(%s) error = %v, want a ledger error naming %s", tt.name, err, tt.wantLine)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("Import(%s) error = %v, want %v", tt.name, err, tt.wantErr)
			}
			if n != tt.wantN {
				t.Errorf("Import(%s) = %d, want %d", tt.name, n, tt.wantN)
			}
		})
	}
	// Only the good first line is stored (once).
	if evs := rangeAll(t, s, "g"); len(evs) != 1 || evs[0].ID != id1 || evs[0].TS != "2026-01-13T10:00:00Z" {
		t.Errorf("Range(g) after bad imports = %+v, want the one event %s with its ts", evs, id1)
	}
}

func testImportEvents(t *testing.T, s ledger.Store) {
	ctx := testContext(t)
	mk := func(group string, seq int64, key string) ledger.Event {
		return ledger.Event{V: 1, ID: envelope.NewID(), TS: "2026-01-13T10:00:00.000Z", Seq: seq, Kind: "chat.message",
			GroupID: group, By: "user", Data: json.RawMessage(`{}`), DedupeKey: key}
	}
	a1, a2, b1 := mk("a", 1, "k1"), mk("a", 2, ""), mk("b", 1, "")
	if n, err := s.ImportEvents(ctx, []ledger.Event{a1, b1, a2}); err != nil || n != 3 {
		t.Fatalf("ImportEvents(a1, b1, a2) = %d, %v, want 3, nil", n, err)
	}
	tests := []struct {
		name    string
		evs     []ledger.Event
		wantN   int
		wantErr error
	}{
		{"identical again", []ledger.Event{a1, a2}, 2, nil},
		{"seq taken", []ledger.Event{mk("a", 2, "")}, 0, ledger.ErrConflict},
		{"seq gap", []ledger.Event{mk("a", 4, "")}, 0, ledger.ErrConflict},
		{"seq zero", []ledger.Event{mk("a", 0, "")}, 0, ledger.ErrInvalid},
		{"dedupe key taken", []ledger.Event{mk("a", 3, "k1")}, 0, ledger.ErrConflict},
		{"stops at first bad", []ledger.Event{mk("b", 2, ""), mk("b", 9, ""), mk("b", 3, "")}, 1, ledger.ErrConflict},
		{"continues after", []ledger.Event{mk("b", 3, "")}, 1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := s.ImportEvents(ctx, tt.evs)
			if n != tt.wantN || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Errorf("ImportEvents(%s) = %d, %v, want %d, %v", tt.name, n, err, tt.wantN, tt.wantErr)
			}
		})
	}
	if got := seqs(rangeAll(t, s, "b")); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Errorf("Range(b) seqs = %v, want [1 2 3]", got)
	}
	if ev, err := s.GetByDedupeKey(ctx, "k1"); err != nil || ev.ID != a1.ID {
		t.Errorf("GetByDedupeKey(k1) = %s, %v, want %s", ev.ID, err, a1.ID)
	}
}

func testClose(t *testing.T, s ledger.Store) {
	ctx := testContext(t)
	ev := appendOne(t, s, rec("g", "chat.message", "")).Event
	if err := s.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	calls := []struct {
		name string
		call func() error
	}{
		{"Append", func() error { _, err := s.Append(ctx, []ledger.Record{rec("g", "chat.message", "")}); return err }},
		{"ImportEvents", func() error {
			_, err := s.ImportEvents(ctx, []ledger.Event{{V: 1, ID: envelope.NewID(), TS: ev.TS, Seq: 2, Kind: "k", GroupID: "g"}})
			return err
		}},
		{"Get", func() error { _, err := s.Get(ctx, ev.ID); return err }},
		{"GetByDedupeKey", func() error { _, err := s.GetByDedupeKey(ctx, "x"); return err }},
		{"Range", func() error { _, err := s.Range(ctx, "g", 0, nil, 0); return err }},
		{"Groups", func() error { _, err := s.Groups(ctx); return err }},
		{"Follow", func() error {
			for _, err := range s.Follow(ctx, "g", 0) {
				if err != nil {
					return err
				}
			}
			return nil
		}},
		{"SetCursor", func() error { _, err := s.SetCursor(ctx, "g", "a", ev.ID); return err }},
		{"GetCursor", func() error { _, err := s.GetCursor(ctx, "g", "a"); return err }},
		{"SetMark", func() error { return s.SetMark(ctx, "m", ledger.Mark{Pos: 1, EventID: ev.ID}) }},
		{"GetMark", func() error { _, err := s.GetMark(ctx, "m"); return err }},
		{"Claim", func() error { _, err := s.Claim(ctx, "g", ev.ID, "a", time.Minute, time.Now()); return err }},
		{"ReleaseClaim", func() error { return s.ReleaseClaim(ctx, "g", ev.ID, "a") }},
		{"ReleaseClaimAsRead", func() error {
			return s.ReleaseClaimAsRead(ctx, ledger.Claim{GroupID: "g", EventID: ev.ID, Actor: "a", ExpiresAt: time.Now()})
		}},
		{"GetClaim", func() error { _, err := s.GetClaim(ctx, "g", ev.ID, time.Now()); return err }},
	}
	for _, c := range calls {
		if err := c.call(); !errors.Is(err, ledger.ErrClosed) {
			t.Errorf("%s() after Close error = %v, want ErrClosed", c.name, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close() = %v, want nil", err)
	}
}
