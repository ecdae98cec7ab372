package gateway_test

import (
	"context"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
	"github.com/crosstalk-go/crosstalk/internal/fakeclock"
)

// TestClaimTakeoverStale applies BeadBoard §4.4 to claims with a fake
// clock: an active holder's claim is never taken over; a stale holder's
// only with TakeoverStale; an evicted holder's claim is released for any
// claimant, and the holder is told.
func TestClaimTakeoverStale(t *testing.T) {
	const stale = time.Minute
	t0 := time.Date(2026, 1, 13, 10, 0, 0, 0, time.UTC)
	clk := fakeclock.New(t0)
	r := gateway.New(memory.New(clk.Now), &gateway.Options{Book: testBook(t), Now: clk.Now, StaleAfter: stale, ClaimTTL: time.Hour})
	ctx := context.Background()
	ev := ingest(t, r, "", env("GEMINI", "@reviewer", "REQUEST", "g", "review please"))[0].Event
	ev2 := ingest(t, r, "", env("GEMINI", "@reviewer", "REQUEST", "g", "and this"))[0].Event
	claim := func(id, actor string, takeover bool) error {
		_, err := r.Act(ctx, gateway.ActionRequest{Action: gateway.ActionClaim, Group: "g", EventID: id, Actor: actor, TakeoverStale: takeover})
		return err
	}
	for _, id := range []string{ev.ID, ev2.ID} {
		if err := claim(id, "claude", false); err != nil {
			t.Fatal(err)
		}
	}
	// claude is killed. Per liveness state of the holder:
	for _, step := range []struct {
		at       time.Duration
		takeover bool
		won      bool
	}{
		{0, true, false},
		{stale - time.Millisecond, true, false}, // active: never
		{stale, false, false},                   // stale: only with takeover
		{stale, true, true},
	} {
		clk.Set(t0.Add(step.at))
		err := claim(ev.ID, "chatgpt", step.takeover)
		if step.won && err != nil || !step.won && !isCode(err, gateway.CodeConflict) {
			t.Fatalf("at +%v, takeover %v: %v, want won=%v", step.at, step.takeover, err, step.won)
		}
	}
	clk.Set(t0.Add(2 * stale)) // evicted: released for any claimant
	if err := claim(ev2.ID, "chatgpt", false); err != nil {
		t.Fatalf("claim of an evicted holder's event = %v", err)
	}
	ds, err := r.Deliveries(ctx, "claude", "g", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	released := 0
	for _, d := range ds {
		if d.Kind == gateway.KindNotify {
			released++
		}
	}
	if released != 2 {
		t.Fatalf("claude was told of %d released claims, want 2: %+v", released, ds)
	}
}

// renewingStore is a ledger whose first GetClaim lets the holder renew
// its claim right after the read, as the holder would through another
// relay.
type renewingStore struct {
	*memory.Store
	renew func()
}

func (s *renewingStore) GetClaim(ctx context.Context, group, eventID string, now time.Time) (ledger.Claim, error) {
	c, err := s.Store.GetClaim(ctx, group, eventID, now)
	if f := s.renew; f != nil {
		s.renew = nil
		f()
	}
	return c, err
}

// TestClaimTakeoverRaceWithRenewal: an evicted holder renews its claim
// between the claimant's read of the claim and its release. The holder
// was told its renewal took, so it keeps the claim, and the claimant is
// refused, instead of both holding it.
func TestClaimTakeoverRaceWithRenewal(t *testing.T) {
	const stale = time.Minute
	t0 := time.Date(2026, 1, 13, 10, 0, 0, 0, time.UTC)
	clk := fakeclock.New(t0)
	store := &renewingStore{Store: memory.New(clk.Now)}
	r := gateway.New(store, &gateway.Options{Book: testBook(t), Now: clk.Now, StaleAfter: stale, ClaimTTL: time.Hour})
	ctx := context.Background()
	ev := ingest(t, r, "", env("GEMINI", "@reviewer", "REQUEST", "g", "review please"))[0].Event
	if _, err := r.Act(ctx, gateway.ActionRequest{Action: gateway.ActionClaim, Group: "g", EventID: ev.ID, Actor: "claude"}); err != nil {
		t.Fatal(err)
	}
	clk.Set(t0.Add(2 * stale)) // claude is evicted
	store.renew = func() {
		if _, err := store.Store.Claim(ctx, "g", ev.ID, "claude", time.Hour, clk.Now()); err != nil {
			t.Errorf("claude's renewal: %v", err)
		}
	}
	_, err := r.Act(ctx, gateway.ActionRequest{Action: gateway.ActionClaim, Group: "g", EventID: ev.ID, Actor: "chatgpt"})
	if !isCode(err, gateway.CodeConflict) {
		t.Fatalf("claim while the holder renewed = %v, want a conflict", err)
	}
	if c, err := store.GetClaim(ctx, "g", ev.ID, clk.Now()); err != nil || c.Actor != "claude" {
		t.Fatalf("claim after the race = %+v, %v; want claude's renewal", c, err)
	}
}
