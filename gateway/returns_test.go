package gateway_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/jetstream"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/sqlite"
	"github.com/crosstalk-go/crosstalk/internal/natstest"
)

var returnsOpts = &gateway.ReturnsOptions{Interval: 15 * time.Minute, Returns: 3, Human: "pat"}

// step runs one scheduler step and returns how many rungs it recorded.
func step(t *testing.T, rt *gateway.Returner) int {
	t.Helper()
	n, _, err := rt.Step(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestReturnsSurviveRestart: the ladder is read back from the ledger — a
// relay that restarts after the second return neither repeats it nor
// returns early, and records the third one interval after the second.
func TestReturnsSurviveRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	clock := &testClock{}
	open := func() (*gateway.Relay, ledger.Store) {
		st, err := sqlite.Open(t.Context(), path, nil)
		if err != nil {
			t.Fatal(err)
		}
		return gateway.New(st, &gateway.Options{Book: returnsBook(t), Now: clock.now}), st
	}
	r, st := open()
	ob := ingest(t, r, "", env("CHATGPT", "CLAUDE", "REQUEST", "g", "review PR 7", obliged("halted", "", "")))[0].Event
	rt := r.NewReturner(returnsOpts)
	if n := step(t, rt); n != 0 {
		t.Fatalf("a fresh obligation returned %d times", n)
	}
	for range 2 {
		clock.add(15 * time.Minute)
		if n := step(t, rt); n != 1 {
			t.Fatalf("step recorded %d rungs, want 1", n)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	clock.add(10 * time.Minute)
	r, st = open()
	defer st.Close()
	rt = r.NewReturner(returnsOpts)
	n, next, err := rt.Step(t.Context())
	if err != nil || n != 0 {
		t.Fatalf("after the restart, 10 min after the second return: %d rungs, %v; want none", n, err)
	}
	if want := clock.now().Add(5 * time.Minute); next.Before(want.Add(-time.Minute)) || next.After(want.Add(time.Minute)) {
		t.Errorf("next rung due %v, want about %v (the second return + 15 min)", next, want)
	}
	clock.add(5 * time.Minute)
	if n := step(t, rt); n != 1 {
		t.Fatalf("third return: %d rungs, want 1", n)
	}
	got := rungsOf(t, r, "g")
	if len(got) != 3 || got[2].want != (rungWant{3, gateway.NoticeObligationReturn, "claude"}) || got[2].related != ob.ID {
		t.Errorf("rungs = %+v, want returns 1-3 to claude", got)
	}
}

// TestReturnsTwoRelaysOneJetStream: two relays, each with its own
// connection to one JetStream ledger, run their schedulers at once at
// every tick; each rung is recorded once.
func TestReturnsTwoRelaysOneJetStream(t *testing.T) {
	nodes, err := natstest.Start(t.TempDir(), 1, false)
	if err != nil {
		t.Fatalf("starting NATS: %v", err)
	}
	t.Cleanup(func() { natstest.StopAll(nodes) })
	clock := &testClock{}
	var rts []*gateway.Returner
	var r *gateway.Relay
	for range 2 {
		st, err := jetstream.Open(t.Context(), nodes[0].URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		r = gateway.New(st, &gateway.Options{Book: returnsBook(t), Now: clock.now})
		rts = append(rts, r.NewReturner(returnsOpts))
	}
	ingest(t, r, "", env("CHATGPT", "CLAUDE", "REQUEST", "g", "review PR 7", obliged("halted", "", "")))
	total := 0
	for range 7 {
		clock.add(15 * time.Minute)
		var wg sync.WaitGroup
		var mu sync.Mutex
		for _, rt := range rts {
			wg.Go(func() {
				n, _, err := rt.Step(context.Background())
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				total += n
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	got := rungsOf(t, r, "g")
	if len(got) != 5 || total != 5 {
		t.Errorf("%d rungs recorded (%d reported), want 5 (3 returns, coordinator, human): %+v", len(got), total, got)
	}
}

// BenchmarkReturnsStep: a relay's first step reads the whole ledger (here
// 100 000 messages, 1 in 100 with an obligation); later steps read only
// what is new. go test -run '^$' -bench ReturnsStep -benchtime 5x ./gateway
func BenchmarkReturnsStep(b *testing.B) {
	st := memory.New(nil)
	r := gateway.New(st, &gateway.Options{Book: returnsBook(b)})
	recs := make([]ledger.Record, 0, 1000)
	for i := range 100_000 {
		d := `{"text":"x","to":["claude"]}`
		if i%100 == 0 {
			d = `{"text":"x","to":["claude"],"obligation":{"blocks":"halted"}}`
		}
		recs = append(recs, ledger.Record{Kind: gateway.KindMessage, GroupID: fmt.Sprintf("g%d", i%100), By: "chatgpt", Data: []byte(d)})
		if len(recs) == cap(recs) {
			if _, err := st.Append(b.Context(), recs); err != nil {
				b.Fatal(err)
			}
			recs = recs[:0]
		}
	}
	for _, first := range []bool{true, false} {
		b.Run(fmt.Sprintf("first=%v", first), func(b *testing.B) {
			rt := r.NewReturner(&gateway.ReturnsOptions{Returns: 3})
			if !first {
				rt.Step(b.Context())
			}
			for b.Loop() {
				if first {
					b.StopTimer()
					rt = r.NewReturner(&gateway.ReturnsOptions{Returns: 3})
					b.StartTimer()
				}
				if _, _, err := rt.Step(b.Context()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
