package reserve

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// TestVoidedIsBounded folds a year of cross-relay races, one voided
// grant every 10 minutes, each against bob's reservation of the repository
// renewed every day: the table forgets a voided grant once it would
// have expired, as it forgets expired reservations, so it holds a bound
// independent of the history, and Voided still answers for the recent.
func TestVoidedIsBounded(t *testing.T) {
	const ttl = 30 * time.Minute
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tb := NewTable()
	seq := int64(0)
	apply := func(at time.Time, id string, d EventData) {
		t.Helper()
		b, _ := json.Marshal(d)
		seq++
		ev := ledger.Event{V: 1, ID: id, TS: ledger.FormatTime(at), Seq: seq, Kind: ledger.KindReservation, GroupID: DefaultGroup, By: d.Agent, Data: b}
		if err := tb.Apply(ev); err != nil {
			t.Fatal(err)
		}
	}
	apply(t0, "bob", EventData{Action: ActionGrant, Agent: "bob", Scope: Root, ExpiresAt: ledger.FormatTime(t0.Add(25 * time.Hour))})
	const every = 10 * time.Minute
	const races = int(365 * 24 * time.Hour / every)
	most := 0
	for i := range races {
		at := t0.Add(time.Duration(i+1) * every)
		if i%int(24*time.Hour/every) == 0 {
			apply(at, fmt.Sprint("renew", i), EventData{Action: ActionRenew, ReservationID: "bob", Agent: "bob", Scope: Root, ExpiresAt: ledger.FormatTime(at.Add(25 * time.Hour))})
		}
		id := fmt.Sprint("grant", i)
		apply(at, id, EventData{Action: ActionGrant, Agent: "alice", Scope: fmt.Sprintf("src/f%d", i), ExpiresAt: ledger.FormatTime(at.Add(ttl))})
		cs, ok := tb.Voided(id)
		if !ok || len(cs) != 1 || cs[0].Holder != "bob" || cs[0].ReservationID != "bob" {
			t.Fatalf("race %d: Voided = %+v, %v, want bob's reservation", i, cs, ok)
		}
		most = max(most, len(tb.voided))
	}
	// Between two prunes: the grants not yet expired at the last one,
	// and those folded since.
	if bound := int(ttl/every) + pruneEvery + 1; most > bound {
		t.Errorf("the table held %d voided grants after %d races, want at most %d", most, races, bound)
	}
	if _, ok := tb.Voided("grant0"); ok {
		t.Error("a voided grant that expired a year ago is still remembered")
	}
}

// appendHook is a ledger.Store whose Append runs after once, when set,
// after appending: events another relay appends between this relay's
// append and the fold that checks it.
type appendHook struct {
	ledger.Store
	after func()
}

func (h *appendHook) Append(ctx context.Context, recs []ledger.Record) ([]ledger.Result, error) {
	res, err := h.Store.Append(ctx, recs)
	if f := h.after; f != nil && err == nil {
		h.after = nil
		f()
	}
	return res, err
}

// TestGrantLapsedBeforeItsCheck: a short grant that expired before the
// relay folded the ledger back to check it — a busy shared ledger, pruned
// meanwhile — is neither voided nor held any more; the request is decided
// again instead of answered as granted with nothing in it, or granted
// though it lost its race.
func TestGrantLapsedBeforeItsCheck(t *testing.T) {
	ctx := context.Background()
	for _, race := range []bool{false, true} {
		t.Run(fmt.Sprint("lost race ", race), func(t *testing.T) {
			f := newFixture(t)
			other := f.open(t)
			h := &appendHook{Store: f.store}
			svc, err := NewService(ctx, h, Options{Now: f.clk.Now})
			if err != nil {
				t.Fatal(err)
			}
			if race {
				svc.beforeAppend = func() {
					svc.beforeAppend = nil
					if _, err := other.Reserve(ctx, Request{Agent: "bob", Scopes: []string{"src/lib"}, TTL: time.Hour}); err != nil {
						t.Errorf("bob: %v", err)
					}
				}
			}
			h.after = func() {
				f.clk.Add(2 * time.Second)
				// Other relays' events: enough for the fold to prune.
				recs := ReleaseRecords(DefaultGroup, "carol", make([]Reservation, pruneEvery))
				for i := range recs {
					recs[i].DedupeKey = fmt.Sprint("carol", i)
				}
				if _, err := f.store.Append(ctx, recs); err != nil {
					t.Error(err)
				}
			}
			got, err := svc.Reserve(ctx, Request{Agent: "alice", Scopes: []string{"src/*", "docs"}, TTL: time.Second})
			if race {
				cs := mustConflict(t, err)
				if len(cs) != 1 || cs[0].Holder != "bob" {
					t.Fatalf("conflicts = %+v, want bob's", cs)
				}
				if rs := f.list(t, svc, ""); len(rs) != 1 || rs[0].Agent != "bob" {
					t.Fatalf("after the race: %+v", rs)
				}
				return
			}
			if err != nil || len(got) != 2 || !got[0].Live(f.clk.Now()) || !got[1].Live(f.clk.Now()) {
				t.Fatalf("Reserve = %+v, %v, want src/* and docs, live", got, err)
			}
		})
	}
}
