package reserve

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
	"github.com/crosstalk-go/crosstalk/internal/fakeclock"
)

type fixture struct {
	clk      *fakeclock.Clock
	store    *memory.Store
	svc      *Service
	lastSeen map[string]time.Time
}

// list is svc.List that fails the test on an error (a failed List must
// not read as "nothing listed").
func (f *fixture) list(t *testing.T, svc *Service, path string) []Reservation {
	t.Helper()
	rs, err := svc.List(context.Background(), path)
	if err != nil {
		t.Fatalf("List(%q): %v", path, err)
	}
	return rs
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{clk: fakeclock.New(time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)), lastSeen: map[string]time.Time{}}
	f.store = memory.New(f.clk.Now)
	t.Cleanup(func() { f.store.Close() })
	f.svc = f.open(t)
	return f
}

func (f *fixture) open(t *testing.T) *Service {
	t.Helper()
	var mu sync.Mutex
	svc, err := NewService(context.Background(), f.store, Options{Now: f.clk.Now, Policy: Policy{
		StaleAfter: 15 * time.Minute,
		LastSeen: func(a string) time.Time {
			mu.Lock()
			defer mu.Unlock()
			return f.lastSeen[a]
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

func (f *fixture) reserve(t *testing.T, agent string, takeover bool, scopes ...string) ([]Reservation, error) {
	t.Helper()
	return f.svc.Reserve(context.Background(), Request{Agent: agent, Scopes: scopes, TTL: time.Hour, Reason: "work", TakeoverStale: takeover})
}

func mustConflict(t *testing.T, err error) []Conflict {
	t.Helper()
	var ce *ConflictError
	if !errors.As(err, &ce) || !errors.Is(err, ErrConflict) {
		t.Fatalf("err = %v, want a *ConflictError", err)
	}
	return ce.Conflicts
}

func TestReserveOwnOverlapAndConflict(t *testing.T) {
	f := newFixture(t)
	got, err := f.reserve(t, "alice", false, "src/auth/*", "docs/api.md")
	if err != nil || len(got) != 2 {
		t.Fatalf("reserve = %v, %v", got, err)
	}
	// Alice may overlap her own reservations.
	if _, err := f.reserve(t, "alice", false, "src/auth/login.go", "./src"); err != nil {
		t.Fatalf("own overlap refused: %v", err)
	}
	// Bob is refused, with holder, scope and class per conflict, and
	// nothing of his request is granted.
	_, err = f.reserve(t, "bob", false, "src/auth/login.go", "README.md")
	cs := mustConflict(t, err)
	want := map[string]Class{"src/auth/*": Partial, "src/auth/login.go": Exact, "src": Partial}
	if len(cs) != len(want) {
		t.Fatalf("conflicts = %+v, want %d", cs, len(want))
	}
	for _, c := range cs {
		if c.Holder != "alice" || c.Scope != "src/auth/login.go" || want[c.HeldScope] != c.Class || c.Liveness != attention.Active {
			t.Errorf("conflict %+v", c)
		}
	}
	if rs := f.list(t, f.svc, "README.md"); len(rs) != 0 {
		t.Errorf("refused request left %v", rs)
	}
	// A request with one overlapping scope grants none of them.
	if _, err := f.reserve(t, "bob", false, "src/components", "README.md"); err == nil {
		t.Fatal("src/components overlaps alice's ./src")
	}
	if _, err := f.reserve(t, "bob", false, "tests/*", "README.md"); err != nil {
		t.Fatalf("disjoint refused: %v", err)
	}
}

func TestWhoHoldsPath(t *testing.T) {
	f := newFixture(t)
	f.reserve(t, "alice", false, "src/auth/*")
	f.reserve(t, "bob", false, "docs/api.md")
	for _, tt := range []struct {
		path string
		want []string
	}{
		{"src/auth/login.go", []string{"alice"}},
		{"./docs//api.md", []string{"bob"}},
		{"src/ui", nil},
		{".", []string{"bob", "alice"}}, // ordered by scope
	} {
		rs, err := f.svc.List(context.Background(), tt.path)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range rs {
			got = append(got, r.Agent)
		}
		if len(got) != len(tt.want) || (len(got) > 0 && got[0] != tt.want[0]) {
			t.Errorf("List(%q) = %v, want %v", tt.path, got, tt.want)
		}
	}
	if _, err := f.svc.List(context.Background(), "../x"); !errors.Is(err, ErrEscapesRoot) {
		t.Errorf("List(../x) err = %v", err)
	}
}

func TestTTLRenewRelease(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	first, err := f.svc.Reserve(ctx, Request{Agent: "alice", Scopes: []string{"src"}, TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// Reserving the same scope again renews it: same id, later expiry.
	f.clk.Add(500 * time.Millisecond)
	again, err := f.svc.Reserve(ctx, Request{Agent: "alice", Scopes: []string{"src/"}, TTL: time.Second})
	if err != nil || len(again) != 1 || again[0].ID != first[0].ID || !again[0].ExpiresAt.After(first[0].ExpiresAt) {
		t.Fatalf("renew = %+v, %v; first %+v", again, err, first)
	}
	f.clk.Add(time.Second)
	if rs := f.list(t, f.svc, ""); len(rs) != 0 {
		t.Fatalf("expired reservation listed: %v", rs)
	}
	// A renewal without a TTL keeps a longer reservation; one with a TTL
	// sets it.
	long, err := f.svc.Reserve(ctx, Request{Agent: "carol", Scopes: []string{"docs"}, TTL: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if kept, err := f.svc.Reserve(ctx, Request{Agent: "carol", Scopes: []string{"docs"}}); err != nil || !kept[0].ExpiresAt.Equal(long[0].ExpiresAt) {
		t.Errorf("renewal without a TTL = %+v, %v; want the 2h expiry %v kept", kept, err, long[0].ExpiresAt)
	}
	if set, err := f.svc.Reserve(ctx, Request{Agent: "carol", Scopes: []string{"docs"}, TTL: time.Minute}); err != nil || !set[0].ExpiresAt.Equal(f.clk.Now().Add(time.Minute)) {
		t.Errorf("renewal with a 1m TTL = %+v, %v; want it set to a minute from now", set, err)
	}
	if _, err := f.svc.Release(ctx, "carol", []string{"docs"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.reserve(t, "bob", false, "src/x"); err != nil {
		t.Fatalf("after expiry: %v", err)
	}
	if _, err := f.svc.Release(ctx, "alice", []string{"src/x"}); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("alice released bob's scope: %v", err)
	}
	if rs, err := f.svc.Release(ctx, "bob", []string{"./src/x/"}); err != nil || len(rs) != 1 {
		t.Fatalf("release = %v, %v", rs, err)
	}
	if _, err := f.reserve(t, "alice", false, "src"); err != nil {
		t.Fatalf("after release: %v", err)
	}
	for _, ttl := range []time.Duration{time.Millisecond, -time.Second, MaxTTL + time.Second} {
		if _, err := f.svc.Reserve(ctx, Request{Agent: "a", Scopes: []string{"x"}, TTL: ttl}); !errors.Is(err, ErrInvalid) {
			t.Errorf("ttl %v: err = %v", ttl, err)
		}
	}
	for _, req := range []Request{
		{Agent: "", Scopes: []string{"x"}},
		{Agent: "a\nb", Scopes: []string{"x"}},
		{Agent: strings.Repeat("a", MaxAgentLen+1), Scopes: []string{"x"}},
		{Agent: "a", Scopes: []string{"x"}, Reason: strings.Repeat("r", MaxReasonLen+1)},
		{Agent: "a", Scopes: []string{"x"}, Reason: "a\x1b[2J\nFAKE   src/*   granted"},
		{Agent: "a", Scopes: []string{"x"}, Reason: "looks \u202edesrever"},
		{Agent: "a"},
		{Agent: "a", Scopes: make([]string, MaxScopes+1)},
	} {
		if _, err := f.svc.Reserve(ctx, req); !errors.Is(err, ErrInvalid) {
			t.Errorf("Reserve(%.40q…) err = %v, want ErrInvalid", req.Agent, err)
		}
	}
	if _, err := f.svc.Reserve(ctx, Request{Agent: "a", Scopes: []string{"../x"}}); !errors.Is(err, ErrEscapesRoot) {
		t.Errorf("../x: err = %v", err)
	}
}

// TestTakeover follows BeadBoard §4.4 per liveness state with a fake
// clock: active never, stale and evicted only with TakeoverStale, and
// the old reservation archived as expired in the ledger.
func TestTakeover(t *testing.T) {
	for _, tt := range []struct {
		name     string
		idle     time.Duration
		takeover bool
		wantLive attention.Liveness
		granted  bool
	}{
		{"active, no flag", 14 * time.Minute, false, attention.Active, false},
		{"active, flag", 14 * time.Minute, true, attention.Active, false},
		{"stale, no flag", 15 * time.Minute, false, attention.Stale, false},
		{"stale, flag", 15 * time.Minute, true, attention.Stale, true},
		{"evicted, no flag", 30 * time.Minute, false, attention.Evicted, false},
		{"evicted, flag", 30 * time.Minute, true, attention.Evicted, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			old, err := f.reserve(t, "alice", false, "src/*")
			if err != nil {
				t.Fatal(err)
			}
			f.clk.Add(tt.idle)
			got, err := f.reserve(t, "bob", tt.takeover, "src/lib")
			if !tt.granted {
				cs := mustConflict(t, err)
				if len(cs) != 1 || cs[0].Liveness != tt.wantLive || cs[0].ReservationID != old[0].ID {
					t.Fatalf("conflicts = %+v", cs)
				}
				return
			}
			if err != nil || len(got) != 1 || got[0].Agent != "bob" {
				t.Fatalf("takeover = %v, %v", got, err)
			}
			evs, _ := f.store.Range(context.Background(), DefaultGroup, 0, []string{ledger.KindReservation}, 0)
			var archived bool
			for _, ev := range evs {
				if string(ev.Data) == `{"action":"takeover","reservation_id":"`+old[0].ID+`","agent":"alice","scope":"src/*","state":"expired","taken_over_by":"bob","renewed_at":"`+ledger.FormatTime(old[0].RenewedAt)+`"}` {
					archived = true
				}
			}
			if !archived {
				t.Fatalf("no takeover event archiving %s in %v", old[0].ID, evs)
			}
			if rs := f.list(t, f.svc, "src/*"); len(rs) != 1 || rs[0].Agent != "bob" {
				t.Fatalf("after takeover: %v", rs)
			}
			tks, err := f.svc.Takeovers(context.Background())
			if err != nil || len(tks) != 1 || tks[0].Reservation != old[0] || tks[0].By != "bob" {
				t.Fatalf("takeovers = %+v, %v; want alice's %+v by bob", tks, err, old[0])
			}
		})
	}
}

// TestHeartbeatKeepsActive: a holder seen recently is active however old
// its reservation.
func TestHeartbeatKeepsActive(t *testing.T) {
	f := newFixture(t)
	f.reserve(t, "alice", false, "src")
	f.clk.Add(40 * time.Minute)
	f.lastSeen["alice"] = f.clk.Now().Add(-time.Minute)
	if _, err := f.reserve(t, "bob", true, "src"); !errors.Is(err, ErrConflict) {
		t.Fatalf("took over an active holder: %v", err)
	}
}

func TestRestartRebuildsFromLedger(t *testing.T) {
	f := newFixture(t)
	f.reserve(t, "alice", false, "src/*")
	f.reserve(t, "bob", false, "docs")
	f.svc.Release(context.Background(), "bob", []string{"docs"})
	want := f.list(t, f.svc, "")
	restarted := f.open(t)
	got, err := restarted.List(context.Background(), "")
	if err != nil || len(got) != 1 || got[0] != want[0] {
		t.Fatalf("after restart %v, %v; want %v", got, err, want)
	}
	if _, err := restarted.Reserve(context.Background(), Request{Agent: "bob", Scopes: []string{"src/x"}}); !errors.Is(err, ErrConflict) {
		t.Fatalf("restarted service granted an overlap: %v", err)
	}
}

// TestConcurrentServicesOneWins runs two services (two relays) on one
// ledger; every round both reserve overlapping scopes at once, and
// exactly one wins.
func TestConcurrentServicesOneWins(t *testing.T) {
	f := newFixture(t)
	other := f.open(t)
	ctx := context.Background()
	for round := range 50 {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, svc := range []*Service{f.svc, other} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				agent := []string{"alice", "bob"}[i]
				_, errs[i] = svc.Reserve(ctx, Request{Agent: agent, Scopes: []string{"free", "src/*"}, TTL: time.Second})
			}()
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			if err == nil {
				won++
			} else if !errors.Is(err, ErrConflict) {
				t.Fatal(err)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d winners (%v)", round, won, errs)
		}
		a, b := f.list(t, f.svc, ""), f.list(t, other, "")
		if len(a) != 2 || len(b) != 2 || a[0] != b[0] {
			t.Fatalf("round %d: views differ or partial grant: %v vs %v", round, a, b)
		}
		f.clk.Add(2 * time.Second)
	}
}

// TestLostRaceIsVoided makes the race certain: another relay's
// overlapping grant lands between this relay's decision and its append.
// The later grant is voided, its other grant released, and the caller
// told who won.
func TestLostRaceIsVoided(t *testing.T) {
	f := newFixture(t)
	other := f.open(t)
	ctx := context.Background()
	f.svc.beforeAppend = func() {
		if _, err := other.Reserve(ctx, Request{Agent: "bob", Scopes: []string{"src/lib"}}); err != nil {
			t.Errorf("bob: %v", err)
		}
	}
	_, err := f.svc.Reserve(ctx, Request{Agent: "alice", Scopes: []string{"docs", "src/*"}})
	cs := mustConflict(t, err)
	if len(cs) != 1 || cs[0].Holder != "bob" || cs[0].HeldScope != "src/lib" || cs[0].Class != Partial {
		t.Fatalf("conflicts = %+v", cs)
	}
	for _, svc := range []*Service{f.svc, other} {
		if rs := f.list(t, svc, ""); len(rs) != 1 || rs[0].Agent != "bob" {
			t.Fatalf("after the race: %v", rs)
		}
	}
}

// TestRenewalRace: a renewal whose reservation was taken over between
// the decision and the append is refused with the taker; one that merely
// expired meanwhile is granted afresh.
func TestRenewalRace(t *testing.T) {
	ctx := context.Background()
	t.Run("taken over", func(t *testing.T) {
		f := newFixture(t)
		other := f.open(t)
		f.reserve(t, "alice", false, "src")
		f.clk.Add(20 * time.Minute) // alice is stale
		f.svc.beforeAppend = func() {
			f.svc.beforeAppend = nil
			if _, err := other.Reserve(ctx, Request{Agent: "bob", Scopes: []string{"src/x"}, TakeoverStale: true}); err != nil {
				t.Errorf("bob's takeover: %v", err)
			}
		}
		_, err := f.reserve(t, "alice", false, "src", "docs")
		cs := mustConflict(t, err)
		if len(cs) != 1 || cs[0].Holder != "bob" || cs[0].Scope != "src" || cs[0].HeldScope != "src/x" {
			t.Fatalf("conflicts = %+v", cs)
		}
		if rs := f.list(t, f.svc, ""); len(rs) != 1 || rs[0].Agent != "bob" {
			t.Fatalf("after the race: %+v (alice's docs grant must be released)", rs)
		}
	})
	t.Run("expired", func(t *testing.T) {
		f := newFixture(t)
		old, _ := f.svc.Reserve(ctx, Request{Agent: "alice", Scopes: []string{"src"}, TTL: time.Second})
		f.clk.Add(500 * time.Millisecond)
		f.svc.beforeAppend = func() {
			f.svc.beforeAppend = nil
			f.clk.Add(time.Second)
		}
		got, err := f.svc.Reserve(ctx, Request{Agent: "alice", Scopes: []string{"src"}, TTL: time.Minute})
		if err != nil || len(got) != 1 || got[0].ID == old[0].ID || got[0].Scope != "src" {
			t.Fatalf("renewal after expiry = %+v, %v", got, err)
		}
	})
}

// TestTakeoverRaceWithRenewal: the holder renews between another relay's
// decision to take its stale reservation over and that relay's append.
// The holder was told its renewal took, so it keeps the reservation: the
// takeover, decided on the reservation as it was before the renewal, does
// not take, and the taker is refused with the holder, on both relays.
func TestTakeoverRaceWithRenewal(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	other := f.open(t)
	if _, err := f.reserve(t, "alice", false, "src"); err != nil {
		t.Fatal(err)
	}
	f.clk.Add(20 * time.Minute) // alice is stale
	var renewed []Reservation
	other.beforeAppend = func() {
		other.beforeAppend = nil
		var err error
		if renewed, err = f.reserve(t, "alice", false, "src"); err != nil {
			t.Errorf("alice's renewal: %v", err)
		}
	}
	_, err := other.Reserve(ctx, Request{Agent: "bob", Scopes: []string{"src/x"}, TakeoverStale: true})
	if len(renewed) != 1 {
		t.Fatalf("alice's renewal = %+v", renewed)
	}
	cs := mustConflict(t, err)
	if len(cs) != 1 || cs[0].Holder != "alice" || cs[0].HeldScope != "src" {
		t.Fatalf("conflicts = %+v", cs)
	}
	for _, svc := range []*Service{f.svc, other} {
		if rs := f.list(t, svc, ""); len(rs) != 1 || rs[0].Agent != "alice" || rs[0].ID != renewed[0].ID {
			t.Fatalf("after the race: %+v, want alice's renewed %+v only", rs, renewed)
		}
	}
}
