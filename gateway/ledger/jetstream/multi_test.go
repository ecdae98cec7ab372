package jetstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/crosstalk-go/crosstalk/internal/natstest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/jetstream"
	"github.com/nats-io/nats.go"
)

// openRelays opens n Stores on one stream, each over its own connection
// and each preferring another node, as n relays would.
func openRelays(t *testing.T, nodes []*testNode, stream string, replicas, n int) []*jetstream.Store {
	t.Helper()
	var stores []*jetstream.Store
	for i := range n {
		var urls []string
		for j := range nodes {
			urls = append(urls, nodes[(i+j)%len(nodes)].URL)
		}
		s, err := jetstream.Open(t.Context(), strings.Join(urls, ","), &jetstream.Options{
			Stream: stream, Replicas: replicas, Timeout: 3 * time.Second,
			NATSOptions: []nats.Option{nats.DontRandomize()},
		})
		if err != nil {
			t.Fatalf("Open(relay %d) error = %v", i, err)
		}
		t.Cleanup(func() { s.Close() })
		stores = append(stores, s)
	}
	return stores
}

// acked is what one acknowledged append returned.
type acked struct {
	key string
	ev  ledger.Event
}

// appendUntilAcked appends one keyed record, retrying with the same key
// until an Append returns success, as a client of a relay would.
func appendUntilAcked(ctx context.Context, s ledger.Store, r ledger.Record) (ledger.Result, error) {
	for {
		res, err := s.Append(ctx, []ledger.Record{r})
		if err == nil {
			return res[0], nil
		}
		if ctx.Err() != nil {
			return ledger.Result{}, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkLedger checks that every group in groups holds dense seqs, that no
// dedupe key appears twice, and that every acknowledged append is present
// with the event it was acknowledged with. It returns the number of
// events.
func checkLedger(t *testing.T, s ledger.Store, groups []string, acks []acked) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	byKey := make(map[string]ledger.Event)
	total := 0
	for _, g := range groups {
		evs, err := s.Range(ctx, g, 0, nil, 0)
		if err != nil {
			t.Fatalf("Range(%s) error = %v", g, err)
		}
		total += len(evs)
		for i, ev := range evs {
			if ev.Seq != int64(i+1) {
				t.Fatalf("Range(%s)[%d].Seq = %d, want %d (seqs must be dense)", g, i, ev.Seq, i+1)
			}
			if ev.DedupeKey == "" {
				continue
			}
			if old, ok := byKey[ev.DedupeKey]; ok {
				t.Errorf("dedupe key %s stored twice: %s/%d and %s/%d", ev.DedupeKey, old.GroupID, old.Seq, ev.GroupID, ev.Seq)
			}
			byKey[ev.DedupeKey] = ev
		}
	}
	for _, a := range acks {
		ev, ok := byKey[a.key]
		if !ok {
			t.Errorf("acknowledged append %s (%s/%d) is missing", a.key, a.ev.GroupID, a.ev.Seq)
			continue
		}
		if !ledger.Equal(ev, a.ev) {
			t.Errorf("acknowledged append %s = %s/%d, stored %s/%d", a.key, a.ev.GroupID, a.ev.Seq, ev.GroupID, ev.Seq)
		}
	}
	return total
}

func rec(group, key string) ledger.Record {
	return ledger.Record{Kind: "chat.message", GroupID: group, By: "agent", DedupeKey: key,
		Data: json.RawMessage(fmt.Sprintf(`{"text":%q}`, key))}
}

// TestMultiWriter runs three Stores (three relays) appending to the same
// groups at once, with overlapping dedupe keys and two-group batches.
func TestMultiWriter(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cluster  bool
		replicas int
	}{{"SingleNode", false, 1}, {"Cluster", true, 3}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.cluster && testing.Short() {
				t.Skip("3-node cluster in -short mode")
			}
			var nodes []*testNode
			if tc.cluster {
				nodes = startCluster(t)
			} else {
				nodes = []*testNode{natstest.Single(t, true)}
			}
			stores := openRelays(t, nodes, uniqueStream(), tc.replicas, 3)
			groups := []string{"g0", "g1", "g2"}
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()

			const workers, perWorker = 6, 25
			var (
				mu   sync.Mutex
				acks []acked
				wg   sync.WaitGroup
			)
			for si, s := range stores {
				for w := range workers {
					wg.Go(func() {
						for i := range perWorker {
							// Keys repeat across relays: worker w of every
							// relay appends key k<w>-<i>, so each key is
							// raced by three relays.
							key := fmt.Sprintf("k%d-%d", w, i)
							g := groups[(w+i)%len(groups)]
							recs := []ledger.Record{rec(g, key)}
							if i%5 == 0 { // a two-group batch, unique to this relay
								recs = append(recs, rec(groups[(w+i+1)%len(groups)], fmt.Sprintf("r%d-w%d-%d", si, w, i)))
							}
							res, err := s.Append(ctx, recs)
							if err != nil {
								t.Errorf("relay %d: Append(%s) error = %v", si, key, err)
								return
							}
							mu.Lock()
							for j, r := range res {
								acks = append(acks, acked{recs[j].DedupeKey, r.Event})
							}
							mu.Unlock()
						}
					})
				}
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			total := checkLedger(t, stores[0], groups, acks)
			want := workers*perWorker + len(stores)*workers*(perWorker/5)
			if total != want {
				t.Errorf("events stored = %d, want %d (one per distinct dedupe key)", total, want)
			}
			// Every relay reads the same ledger.
			for i, s := range stores[1:] {
				gs, err := s.Groups(ctx)
				want, _ := stores[0].Groups(ctx)
				if err != nil || !slices.Equal(gs, want) {
					t.Errorf("relay %d: Groups() = %v, %v, want %v", i+1, gs, err, want)
				}
			}
		})
	}
}

// TestClaimsAcrossStores races claims on one event from three Stores.
func TestClaimsAcrossStores(t *testing.T) {
	nodes := []*testNode{natstest.Single(t, true)}
	stores := openRelays(t, nodes, uniqueStream(), 1, 3)
	ctx := t.Context()
	res, err := stores[0].Append(ctx, []ledger.Record{rec("g", "role-event")})
	if err != nil {
		t.Fatal(err)
	}
	ev := res[0].Event
	now := time.Now()
	for round := range 3 {
		type out struct {
			actor string
			c     ledger.Claim
			err   error
		}
		var wg sync.WaitGroup
		outs := make(chan out, 15)
		for si, s := range stores {
			for a := range 5 {
				actor := fmt.Sprintf("agent-%d-%d-%d", round, si, a)
				wg.Go(func() {
					c, err := s.Claim(ctx, "g", ev.ID, actor, time.Minute, now.Add(time.Duration(round)*time.Hour))
					outs <- out{actor, c, err}
				})
			}
		}
		wg.Wait()
		close(outs)
		var winners []string
		holders := make(map[string]bool)
		for o := range outs {
			switch {
			case o.err == nil:
				winners = append(winners, o.actor)
				holders[o.c.Actor] = true
			case errors.Is(o.err, ledger.ErrClaimed):
				holders[o.c.Actor] = true
			default:
				t.Errorf("round %d: Claim(%s) error = %v, want nil or ErrClaimed", round, o.actor, o.err)
			}
		}
		if len(winners) != 1 || len(holders) != 1 || !holders[winners[0]] {
			t.Errorf("round %d: winners %v, holders reported %v; want one winner that everyone sees", round, winners, holders)
		}
		// Each Store sees the winner.
		for si, s := range stores {
			c, err := s.GetClaim(ctx, "g", ev.ID, now.Add(time.Duration(round)*time.Hour))
			if err != nil || len(winners) == 1 && c.Actor != winners[0] {
				t.Errorf("round %d: relay %d: GetClaim() = %+v, %v, want %v", round, si, c, err, winners)
			}
		}
		// The next round is an hour later: the claim has lapsed and is
		// taken over by exactly one of the new claimants.
	}
}

// TestKillNode appends from three Stores to an R3 stream on a 3-node
// cluster and shuts the stream leader's node down in the middle. Clients
// retry failed appends with the same dedupe key, as relays' clients do.
// Every acknowledged append must be stored exactly once with dense seqs,
// and followers on every Store must see every event.
func TestKillNode(t *testing.T) {
	if testing.Short() {
		t.Skip("3-node cluster in -short mode")
	}
	nodes := startCluster(t)
	stream := uniqueStream()
	stores := openRelays(t, nodes, stream, 3, 3)
	groups := []string{"g0", "g1"}
	ctx, cancel := context.WithTimeout(t.Context(), 75*time.Second)
	defer cancel()

	// Followers, one per relay, on g0.
	fctx, stopFollow := context.WithCancel(ctx)
	defer stopFollow()
	var fmu sync.Mutex
	followed := make([][]ledger.Event, len(stores))
	ferrs := make([]error, len(stores))
	var fwg sync.WaitGroup
	for i, s := range stores {
		fwg.Go(func() {
			for ev, err := range s.Follow(fctx, "g0", 0) {
				fmu.Lock()
				if err != nil {
					ferrs[i] = err
				} else {
					followed[i] = append(followed[i], ev)
				}
				fmu.Unlock()
			}
		})
	}

	var (
		mu       sync.Mutex
		acks     []acked
		wg       sync.WaitGroup
		appended = make(chan struct{}, 10000)
		stop     = make(chan struct{})
	)
	for si, s := range stores {
		for w := range 6 {
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					key := fmt.Sprintf("r%d-w%d-%d", si, w, i)
					res, err := appendUntilAcked(ctx, s, rec(groups[i%len(groups)], key))
					if err != nil {
						t.Errorf("relay %d: Append(%s) never acknowledged: %v", si, key, err)
						return
					}
					mu.Lock()
					acks = append(acks, acked{key, res.Event})
					mu.Unlock()
					appended <- struct{}{}
				}
			})
		}
	}
	waitAppends := func(n int) {
		for range n {
			select {
			case <-appended:
			case <-ctx.Done():
				t.Fatalf("appends stalled: %v", ctx.Err())
			}
		}
	}
	waitAppends(150)
	info, err := stores[0].Conn().Request("$JS.API.STREAM.INFO."+stream, nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var si struct {
		Cluster struct {
			Leader string `json:"leader"`
		} `json:"cluster"`
	}
	json.Unmarshal(info.Data, &si)
	killed := -1
	for i, n := range nodes {
		if n.Server.Name() == si.Cluster.Leader {
			killed = i
		}
	}
	if killed < 0 {
		t.Fatalf("stream leader %q is none of the nodes", si.Cluster.Leader)
	}
	t.Logf("shutting down %s, the stream leader, after 150 appends", si.Cluster.Leader)
	nodes[killed].Stop()
	waitAppends(150) // the load goes on on the two others
	close(stop)
	wg.Wait()
	if t.Failed() {
		return
	}

	survivor := stores[(killed+1)%len(stores)]
	total := checkLedger(t, survivor, groups, acks)
	if total != len(acks) {
		t.Errorf("events stored = %d, acknowledged %d; want equal (no unacknowledged leftovers expected: clients retried until acknowledged)", total, len(acks))
	}
	var st jetstream.Stats
	for _, s := range stores {
		x := s.Stats()
		st.Batches += x.Batches
		st.Conflicts += x.Conflicts
		st.Resends += x.Resends
	}
	t.Logf("%d appends acknowledged, %d events stored; %d batches, %d conflicts, %d resends of batches with unknown outcome",
		len(acks), total, st.Batches, st.Conflicts, st.Resends)

	g0, err := survivor.Range(ctx, "g0", 0, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Let the followers catch up, then stop them.
	deadline := time.Now().Add(30 * time.Second)
	for {
		fmu.Lock()
		done := true
		for _, evs := range followed {
			done = done && len(evs) >= len(g0)
		}
		fmu.Unlock()
		if done || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	stopFollow()
	fwg.Wait()
	for i, evs := range followed {
		if ferrs[i] != nil {
			t.Errorf("relay %d: Follow(g0) error = %v", i, ferrs[i])
		}
		if len(evs) != len(g0) {
			t.Errorf("relay %d: Follow(g0) saw %d events, want %d", i, len(evs), len(g0))
		}
		for j, ev := range evs {
			if j < len(g0) && ev.ID != g0[j].ID {
				t.Errorf("relay %d: Follow(g0)[%d] = %s seq %d, want %s", i, j, ev.ID, ev.Seq, g0[j].ID)
				break
			}
		}
	}
}
