package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/sqlite"
	"github.com/crosstalk-go/crosstalk/gateway/projection"
)

// projAgents are the actors of the random ledgers: two are in the
// address book (one with a role), the others only in the ledger.
var projAgents = []string{"claude", "chatgpt", "bob", "carol", "dave"}

// projBook is the address book of the random ledgers' relays.
func projBook(t *testing.T) *gateway.AddressBook {
	t.Helper()
	b, err := gateway.NewAddressBook([]gateway.Agent{
		{ID: "claude", Names: []string{"CLAUDE"}, Roles: []string{"reviewer"}},
		{ID: "chatgpt", Names: []string{"CHATGPT"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// appendRandom appends n events of a random mix to r's ledger through
// r.Store() (so the projections follow each append): requests, broadcasts,
// replies in threads, ACK and NACK answers, role and @all mentions,
// obligations and their discharges, acks, notices and their acks,
// dispositions, claims, in three groups, some in batches of several.
func appendRandom(t *testing.T, r *gateway.Relay, rng *rand.Rand, n int) {
	t.Helper()
	ctx := context.Background()
	groups := []string{"g1", "g2", "g3"}
	type sent struct {
		ev              ledger.Event
		msg, thread, to string
		obligation      bool
	}
	var msgs []sent
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	for i := 0; i < n; {
		var recs []ledger.Record
		batch := 1 + rng.IntN(3)
		for range batch {
			i++
			g, from := pick(groups), pick(projAgents)
			var d gateway.EventData
			rec := ledger.Record{GroupID: g, By: from, Kind: gateway.KindMessage}
			var target *sent
			if len(msgs) > 0 {
				target = &msgs[rng.IntN(len(msgs))]
				g = target.ev.GroupID
				rec.GroupID = g
			}
			switch k := rng.IntN(12); {
			case k < 6 || target == nil:
				intents := []string{envelope.IntentRequest, envelope.IntentRequest, envelope.IntentBroadcast, envelope.IntentRespond, envelope.IntentAck, envelope.IntentNack, envelope.IntentHandoff}
				to := pick(append(slices.Clone(projAgents), "@reviewer", "@all"))
				e := envelope.New(strings.ToUpper(from), strings.ToUpper(to), pick(intents), fmt.Sprintf("event %d", i))
				e.Context = g
				if target != nil && rng.IntN(2) == 0 {
					e.Thread, e.Parent = target.thread, target.msg
					if e.Thread == "" {
						e.Thread = "T-" + target.msg
					}
					d.ReplyTo = target.ev.ID
				} else if rng.IntN(3) == 0 {
					e.Thread = fmt.Sprintf("T%d", rng.IntN(4))
				}
				d.Text, d.Priority = e.Body, pick([]string{"normal", "attention"})
				d.X = &gateway.XCrosstalk{Envelope: e, Transport: "test", Sender: from, Verification: gateway.StatusUnsigned}
				if to != "@all" {
					d.To = []string{to}
				}
				if rng.IntN(5) == 0 {
					d.Obligation = &attention.Obligation{Blocks: attention.BlocksHalted}
				}
			case k < 8:
				rec.Kind, rec.By = gateway.KindAck, target.to
				d.ActorID, d.EventID, d.To = target.to, target.ev.ID, []string{target.ev.By}
			case k < 9:
				rec.Kind, rec.By = gateway.KindDisposition, target.to
				d.ActorID, d.EventID, d.Disposition = target.to, target.ev.ID, pick([]string{"resolved", "deferred"})
			case k < 10:
				rec.Kind, rec.By = gateway.KindClaim, pick(projAgents)
				d.ActorID, d.EventID, d.ExpiresAt = rec.By, target.ev.ID, ledger.FormatTime(time.Now().Add(time.Hour))
			case k < 11:
				rec.Kind, rec.By = gateway.KindDischarge, target.ev.By
				d.EventID = target.ev.ID
			default:
				rec.Kind, rec.By = gateway.KindNotify, "system"
				d.TargetActorID, d.RequiresAck, d.Kind = pick(projAgents), true, "info"
				if rng.IntN(2) == 0 {
					rec.Kind, rec.By = gateway.KindNotifyAck, target.to
					d = gateway.EventData{ActorID: target.to, NotifyEventID: target.ev.ID}
				}
			}
			b, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			rec.Data = b
			recs = append(recs, rec)
		}
		res, err := r.Store().Append(ctx, recs)
		if err != nil {
			t.Fatalf("Append = %v", err)
		}
		for _, re := range res {
			d, err := gateway.ParseData(re.Event)
			if err != nil || re.Event.Kind != gateway.KindMessage || d.X == nil {
				continue
			}
			to := re.Event.By
			if len(d.To) > 0 {
				to = strings.TrimPrefix(d.To[0], "@")
			}
			msgs = append(msgs, sent{ev: re.Event, msg: d.X.Envelope.Message, thread: d.X.Envelope.Thread, to: to, obligation: d.Obligation != nil})
		}
	}
}

// TestProjectionsMatchRebuild appends random event mixes on each ledger
// backend and checks that the projections the relay maintained append by
// append are exactly those a rebuild from the ledger makes
// (CheckProjection, `crosstalk ledger reindex --check`), and that
// Reindex and a restarted relay (caught up from the high-water mark)
// leave the same rows.
func TestProjectionsMatchRebuild(t *testing.T) {
	ctx := context.Background()
	stores := []struct {
		name string
		open func(t *testing.T) ledger.Store
	}{
		{"memory", func(*testing.T) ledger.Store { return memory.New(nil) }},
		{"sqlite", func(t *testing.T) ledger.Store {
			st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), nil)
			if err != nil {
				t.Fatal(err)
			}
			return st
		}},
	}
	for _, sc := range stores {
		for seed := range uint64(3) {
			t.Run(fmt.Sprintf("%s/seed%d", sc.name, seed), func(t *testing.T) {
				st := sc.open(t)
				defer st.Close()
				path := filepath.Join(t.TempDir(), "projection.db")
				db, err := projection.Open(ctx, path)
				if err != nil {
					t.Fatal(err)
				}
				book := projBook(t)
				r := gateway.New(st, &gateway.Options{Book: book, Projection: db})
				rng := rand.New(rand.NewPCG(seed, 13))
				appendRandom(t, r, rng, 300)
				if diff, err := r.CheckProjection(ctx); err != nil || len(diff) > 0 {
					t.Fatalf("CheckProjection = %d rows differ (%v): %s", len(diff), err, strings.Join(diff[:min(len(diff), 10)], "\n"))
				}
				incremental, err := db.Dump(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if len(incremental) < 100 {
					t.Fatalf("only %d projection rows from 300 events", len(incremental))
				}
				if err := r.Reindex(ctx); err != nil {
					t.Fatalf("Reindex = %v", err)
				}
				rebuilt, _ := db.Dump(ctx)
				if !slices.Equal(incremental, rebuilt) {
					t.Fatalf("Reindex changed the projections: %d rows, were %d", len(rebuilt), len(incremental))
				}
				db.Close()

				// A relay restarted on the same files catches up from the
				// mark: events appended meanwhile (by another relay, an
				// import) are applied once.
				other := gateway.New(st, &gateway.Options{Book: book})
				appendRandom(t, other, rng, 100)
				db2, err := projection.Open(ctx, path)
				if err != nil {
					t.Fatal(err)
				}
				defer db2.Close()
				r2 := gateway.New(st, &gateway.Options{Book: book, Projection: db2})
				if diff, err := r2.CheckProjection(ctx); err != nil || len(diff) > 0 {
					t.Fatalf("after a restart, CheckProjection = %d rows differ (%v): %s", len(diff), err, strings.Join(diff[:min(len(diff), 10)], "\n"))
				}
			})
		}
	}
}

// TestProjectionOfAnotherLedger checks that projections whose high-water
// mark names an event the ledger does not hold there (a restored or
// replaced ledger) are rebuilt, not trusted.
func TestProjectionOfAnotherLedger(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "projection.db")
	db, err := projection.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	book := projBook(t)
	first := gateway.New(memory.New(nil), &gateway.Options{Book: book, Projection: db})
	appendRandom(t, first, rand.New(rand.NewPCG(1, 2)), 50)
	if err := first.Quiesce(ctx); err != nil {
		t.Fatal(err)
	}
	db.Close()

	st := memory.New(nil)
	appendRandom(t, gateway.New(st, &gateway.Options{Book: book}), rand.New(rand.NewPCG(3, 4)), 80)
	db2, err := projection.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	r := gateway.New(st, &gateway.Options{Book: book, Projection: db2})
	if diff, err := r.CheckProjection(ctx); err != nil || len(diff) > 0 {
		t.Fatalf("CheckProjection = %d rows differ (%v): %s", len(diff), err, strings.Join(diff[:min(len(diff), 10)], "\n"))
	}
}

// TestDeliveriesOfMatchesWalk checks that deliveries decided from the
// projections (DeliveriesOf over the whole log) make the same C2A
// decisions as a walk of the ledger from its first event (FollowAgent,
// which learns thread participation event by event).
func TestDeliveriesOfMatchesWalk(t *testing.T) {
	ctx := context.Background()
	r := gateway.New(memory.New(nil), &gateway.Options{Book: projBook(t)})
	appendRandom(t, r, rand.New(rand.NewPCG(7, 7)), 300)
	var log []ledger.Logged
	for after := int64(0); ; {
		page, err := r.Store().Log(ctx, after, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		log = append(log, page...)
		after = page[len(page)-1].Pos
	}
	key := func(d gateway.Delivery) string {
		return fmt.Sprintf("%d %s %s %s %s %s", d.Position, d.EventID, d.Directedness, d.Policy, d.Injection, d.Reason)
	}
	threaded := 0
	for _, agent := range projAgents {
		got, err := r.DeliveriesOf(ctx, agent, log)
		if err != nil {
			t.Fatalf("DeliveriesOf(%s) = %v", agent, err)
		}
		// The walk: every delivery up to the last one DeliveriesOf has.
		var want []string
		wctx, cancel := context.WithCancel(ctx)
		for d, err := range r.FollowAgent(wctx, agent, 0) {
			if err != nil {
				t.Fatalf("FollowAgent(%s) = %v", agent, err)
			}
			want = append(want, key(d))
			if d.Position >= got[len(got)-1].Position {
				break
			}
		}
		cancel()
		var have []string
		for _, d := range got {
			have = append(have, key(d))
			if d.Directedness == attention.ToMyRole && d.Reason == attention.ReasonThreadParticipant {
				threaded++
			}
		}
		if !slices.Equal(have, want) {
			for i := range min(len(have), len(want)) {
				if have[i] != want[i] {
					t.Fatalf("%s: delivery %d from the projections %q, the walk %q", agent, i, have[i], want[i])
				}
			}
			t.Fatalf("%s: %d deliveries from the projections, %d from the walk", agent, len(have), len(want))
		}
	}
	if threaded == 0 {
		t.Fatal("no delivery to a thread participant: the mix does not test participation")
	}
}

// TestDeliveryMatchesDeliveries checks that Relay.Delivery, which reads
// one event, gives for every event of a mixed ledger the delivery that
// the whole read (Deliveries with PerEvent, what c2a.FindDelivery walked
// before) gives, and ok=false exactly for the events that read leaves
// out; and that a group other than the event's finds nothing.
func TestDeliveryMatchesDeliveries(t *testing.T) {
	ctx := context.Background()
	r := gateway.New(memory.New(nil), &gateway.Options{Book: projBook(t)})
	appendRandom(t, r, rand.New(rand.NewPCG(11, 3)), 300)
	evs, err := r.Store().Log(ctx, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, agent := range projAgents {
		all, err := r.Deliveries(gateway.PerEvent(ctx), agent, "", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]gateway.Delivery{}
		for _, d := range all {
			want[d.EventID] = d
		}
		for _, l := range evs {
			got, ok, err := r.Delivery(ctx, agent, "", l.Event.ID)
			if err != nil {
				t.Fatal(err)
			}
			w, wok := want[l.Event.ID]
			if ok != wok || ok && !reflect.DeepEqual(got, w) {
				t.Fatalf("%s: Delivery(%s) = %+v, %v; the whole read gives %+v, %v", agent, l.Event.ID, got, ok, w, wok)
			}
			if ok {
				found++
				if _, ok, _ := r.Delivery(ctx, agent, l.Event.GroupID+"x", l.Event.ID); ok {
					t.Fatalf("%s: Delivery(%s) found in a group not the event's", agent, l.Event.ID)
				}
			}
		}
		if _, ok, err := r.Delivery(ctx, agent, "", "no-such-event"); ok || err != nil {
			t.Fatalf("Delivery(no-such-event) = %v, %v; want not found, no error", ok, err)
		}
	}
	if found == 0 {
		t.Fatal("no event delivered: the mix tests nothing")
	}
}

// TestOwedMatchesDeliveries checks that Owed, read from the projections
// in pages of 7, lists exactly what the agent's deliveries over every
// group say it owes (Delivery.Owes), and with All what it settled too.
func TestOwedMatchesDeliveries(t *testing.T) {
	ctx := context.Background()
	r := gateway.New(memory.New(nil), &gateway.Options{Book: projBook(t)})
	appendRandom(t, r, rand.New(rand.NewPCG(5, 8)), 400)
	owing := 0
	for _, agent := range append(slices.Clone(projAgents), "gemini") {
		ds, err := r.Deliveries(ctx, agent, "", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, all := range []bool{false, true} {
			var want []string
			for _, d := range ds {
				if d.Owes() || all && d.Settled() != "" {
					want = append(want, d.EventID)
				}
			}
			slices.Sort(want)
			var got []string
			for q := (gateway.OpenSetQuery{All: all, Limit: 7}); ; {
				p, err := r.Owed(ctx, agent, q)
				if err != nil {
					t.Fatalf("Owed(%s) = %v", agent, err)
				}
				for _, d := range p.Items {
					got = append(got, d.EventID)
				}
				if p.Next == "" {
					break
				}
				q.After = p.Next
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s (all %v): Owed = %d items %v, deliveries owe %d %v", agent, all, len(got), got, len(want), want)
			}
			if !all {
				owing += len(want)
			}
		}
	}
	if owing == 0 {
		t.Fatal("nobody owes anything: the mix does not test Owed")
	}
}

// ingestRandom ingests n random envelopes through r.Ingest, one intake
// each: requests, replies in threads, ACKs and NACKs of earlier
// messages, obligations, handoffs, broadcasts, group and role mentions,
// errors and rejections. The relay projects them from the data it
// marshalled, not from the ledger.
func ingestRandom(t *testing.T, r *gateway.Relay, rng *rand.Rand, n int) {
	t.Helper()
	ctx := context.Background()
	type sent struct{ from, msg, thread, group string }
	var msgs []sent
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	names := []string{"CLAUDE", "CHATGPT", "BOB", "CAROL", "DAVE"}
	for i := range n {
		from, to := pick(names), pick(append(slices.Clone(names), "ALL", "@reviewer"))
		intent := pick([]string{envelope.IntentRequest, envelope.IntentRequest, envelope.IntentRespond, envelope.IntentBroadcast,
			envelope.IntentAck, envelope.IntentNack, envelope.IntentHandoff, envelope.IntentEscalate, envelope.IntentError})
		group := pick([]string{"g1", "g2", "g3"})
		var mods []func(*envelope.Envelope)
		if len(msgs) > 0 && (rng.IntN(2) == 0 || intent == envelope.IntentAck || intent == envelope.IntentNack) {
			p := msgs[rng.IntN(len(msgs))]
			group, to = p.group, p.from
			mods = append(mods, func(e *envelope.Envelope) { e.Parent, e.Thread = p.msg, p.thread })
		}
		switch {
		case intent == envelope.IntentHandoff:
			mods = append(mods, withMeta("handoff", "Subject", "s", "Summary", "done so far", "Next-Action", "go on"))
		case intent == envelope.IntentRequest && rng.IntN(4) == 0:
			mods = append(mods, withMeta("obligation", "Blocks", "halted", "Default-Action", "ship"))
		case rng.IntN(20) == 0:
			mods = append(mods, withMeta("obligation", "Blocks", "nonsense")) // rejected
		}
		text := env(from, to, intent, group, fmt.Sprintf("envelope %d", i), mods...)
		outs, err := r.Ingest(ctx, gateway.Intake{Transport: "test", Data: strings.NewReader(text)})
		if err != nil {
			t.Errorf("Ingest = %v", err) // not Fatal: it runs in goroutines too
			return
		}
		for _, o := range outs {
			if o.Reject == nil && o.Envelope != nil {
				d, _ := gateway.ParseData(o.Event)
				if d.X != nil && d.X.Envelope != nil {
					msgs = append(msgs, sent{from: from, msg: d.X.Envelope.Message, thread: d.X.Envelope.Thread, group: group})
				}
			}
		}
	}
}

// TestProjectionsFromAppends checks the write path's projections alone:
// with a sync after every append, the relay applies the facts of what it
// appended (from the data it marshalled for an intake, from the stored
// event for other appends) without reading the ledger back after its
// first catch-up, and they are exactly what a rebuild from the ledger
// makes.
func TestProjectionsFromAppends(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"memory", "sqlite"} {
		for seed := range uint64(2) {
			t.Run(fmt.Sprintf("%s/seed%d", name, seed), func(t *testing.T) {
				var st ledger.Store = memory.New(nil)
				if name == "sqlite" {
					s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), nil)
					if err != nil {
						t.Fatal(err)
					}
					st = s
				}
				defer st.Close()
				db, err := projection.Open(ctx, "")
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				r := gateway.New(st, &gateway.Options{Book: projBook(t), Projection: db})
				gateway.SyncProjectionsOnEveryAppend(r)
				rng := rand.New(rand.NewPCG(seed, 29))
				for range 3 {
					ingestRandom(t, r, rng, 60)
					appendRandom(t, r, rng, 60)
				}
				if err := r.Quiesce(ctx); err != nil {
					t.Fatal(err)
				}
				if n := gateway.ProjectionLogReads(r); n != 1 {
					t.Errorf("the write path read the log %d times, want once (its first catch-up)", n)
				}
				last, err := st.LogBefore(ctx, 0, 1)
				if err != nil || len(last) != 1 {
					t.Fatalf("LogBefore = %v, %v", last, err)
				}
				if pos, id, err := db.HighWater(ctx); err != nil || pos != last[0].Pos || id != last[0].ID {
					t.Fatalf("high-water mark = %d %s (%v), want the log's end %d %s", pos, id, err, last[0].Pos, last[0].ID)
				}
				if diff, err := r.CheckProjection(ctx); err != nil || len(diff) > 0 {
					t.Fatalf("CheckProjection = %d rows differ (%v): %s", len(diff), err, strings.Join(diff[:min(len(diff), 10)], "\n"))
				}
			})
		}
	}
}

// TestProjectionsConcurrentAppends ingests from many goroutines at once
// (the positions of their appends interleave, and a sync may find the
// one before its run still on its way back) and checks the projections
// against a rebuild.
func TestProjectionsConcurrentAppends(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r := gateway.New(st, &gateway.Options{Book: projBook(t)})
	gateway.SyncProjectionsOnEveryAppend(r)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() { ingestRandom(t, r, rand.New(rand.NewPCG(uint64(w), 31)), 40) })
	}
	wg.Wait()
	if diff, err := r.CheckProjection(ctx); err != nil || len(diff) > 0 {
		t.Fatalf("CheckProjection = %d rows differ (%v): %s", len(diff), err, strings.Join(diff[:min(len(diff), 10)], "\n"))
	}
}

// TestQuiesceNeverSynced: closing a relay whose projections never synced
// (a command that opened the ledger and did nothing with them) does not
// read the whole log to catch them up, while a relay that did sync gets
// what its appends queued applied.
func TestQuiesceNeverSynced(t *testing.T) {
	ctx := context.Background()
	st := memory.New(nil)
	for i := range 20 {
		rec := ledger.Record{Kind: gateway.KindMessage, GroupID: "g", By: "a", Data: json.RawMessage(fmt.Sprintf(`{"text":"m%d"}`, i))}
		if _, err := st.Append(ctx, []ledger.Record{rec}); err != nil {
			t.Fatal(err)
		}
	}
	db, err := projection.Open(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r := gateway.New(st, &gateway.Options{Book: projBook(t), Projection: db})
	if err := r.Quiesce(ctx); err != nil {
		t.Fatal(err)
	}
	if n := gateway.ProjectionLogReads(r); n != 0 {
		t.Errorf("Quiesce of a relay that never synced read the log %d times, want 0", n)
	}
	if pos, _, err := db.HighWater(ctx); err != nil || pos != 0 {
		t.Errorf("high-water mark = %d (%v), want 0: nothing applied", pos, err)
	}
	// Reads still catch up after Quiesce.
	if err := r.SyncProjection(ctx); err != nil {
		t.Fatal(err)
	}
	if pos, _, err := db.HighWater(ctx); err != nil || pos != 20 {
		t.Errorf("after a read's sync, high-water mark = %d (%v), want 20", pos, err)
	}
}
