package gateway_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/sqlite"
)

// BenchmarkDeliveries measures an agent's inbox over a group of 2 000
// messages on SQLite: what `crosstalk inbox`, MCP list_events and the web
// agent page pay per call, from the group's start and for a client that
// polls with its cursor.
func BenchmarkDeliveries(b *testing.B) {
	st, err := sqlite.Open(context.Background(), b.TempDir()+"/l.db", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	r := gateway.New(st, nil)
	var text strings.Builder
	for i := 0; i < 2000; i++ {
		to := []string{"CLAUDE", "GEMINI", "@reviewer", "ALL"}[i%4]
		e := envelope.New("CHATGPT", to, envelope.IntentRequest, fmt.Sprintf("message %d", i))
		e.Context = "g"
		m, _ := envelope.Marshal(e)
		text.Write(m)
		if i%100 == 99 {
			if _, err := r.Ingest(context.Background(), gateway.Intake{Transport: "bench", Data: strings.NewReader(text.String())}); err != nil {
				b.Fatal(err)
			}
			text.Reset()
		}
	}
	ctx := context.Background()
	// An inbox from the group's start: the whole group is read.
	b.Run("from-start", func(b *testing.B) {
		for b.Loop() {
			ds, err := r.Deliveries(ctx, "claude", "g", 0, 0)
			if err != nil || len(ds) != 2000 {
				b.Fatalf("Deliveries = %d, %v", len(ds), err)
			}
		}
	})
	// A client polling with its cursor: 10 new messages each time, the
	// state after its previous call resumed.
	b.Run("poll-10-new", func(b *testing.B) {
		gs, err := st.Groups(ctx)
		if err != nil {
			b.Fatal(err)
		}
		since := gs[0].LastSeq
		if _, err := r.Deliveries(ctx, "claude", "g", since, 0); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			b.StopTimer()
			text.Reset()
			for i := range 10 {
				e := envelope.New("CHATGPT", "CLAUDE", envelope.IntentRequest, fmt.Sprintf("new %d", i))
				e.Context = "g"
				m, _ := envelope.Marshal(e)
				text.Write(m)
			}
			if _, err := r.Ingest(ctx, gateway.Intake{Transport: "bench", Data: strings.NewReader(text.String())}); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			ds, err := r.Deliveries(ctx, "claude", "g", since, 0)
			if err != nil || len(ds) != 10 {
				b.Fatalf("Deliveries = %d, %v", len(ds), err)
			}
			since = ds[len(ds)-1].Seq
		}
	})
}

// BenchmarkFollowAgent measures an agent stream replaying a ledger of
// 2 000 messages over 20 groups on SQLite from position 0: the work per
// delivery of GET /v1/agents/{agent}/stream before it goes live. The
// "buffered" run is the same for an agent whose address book entry turns
// buffering on (every message is its own run: the cost of holding and
// releasing, docs/agents.md "Buffered and digest delivery").
func BenchmarkFollowAgent(b *testing.B) {
	st, err := sqlite.Open(context.Background(), b.TempDir()+"/l.db", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	r := gateway.New(st, nil)
	var text strings.Builder
	for i := range 2000 {
		e := envelope.New("CHATGPT", "CLAUDE", envelope.IntentRequest, fmt.Sprintf("message %d", i))
		e.Context = fmt.Sprintf("g%d", i%20)
		m, _ := envelope.Marshal(e)
		text.Write(m)
		if i%100 == 99 {
			if _, err := r.Ingest(context.Background(), gateway.Intake{Transport: "bench", Data: strings.NewReader(text.String())}); err != nil {
				b.Fatal(err)
			}
			text.Reset()
		}
	}
	book, err := gateway.NewAddressBook([]gateway.Agent{{ID: "claude", Buffer: &attention.Buffer{}}})
	if err != nil {
		b.Fatal(err)
	}
	// The buffered stream holds the last run until its quiet window
	// ends: it counts the 1 999 the next message releases.
	for _, bc := range []struct {
		name string
		r    *gateway.Relay
		want int
	}{{"plain", r, 2000}, {"buffered", gateway.New(st, &gateway.Options{Book: book}), 1999}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				ctx, cancel := context.WithCancel(context.Background())
				n := 0
				for _, err := range bc.r.FollowAgent(ctx, "claude", 0) {
					if err != nil {
						b.Fatal(err)
					}
					if n++; n == bc.want {
						break
					}
				}
				cancel()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*bc.want), "ns/delivery")
		})
	}
	// Sixteen streams of the agent at once, as sixteen connected
	// harnesses read the ledger's tail: wall time per delivery and
	// stream, on all the machine's CPUs.
	b.Run("streams16", func(b *testing.B) {
		const streams = 16
		for b.Loop() {
			var wg sync.WaitGroup
			for range streams {
				wg.Go(func() {
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					n := 0
					for _, err := range r.FollowAgent(ctx, "claude", 0) {
						if err != nil {
							b.Error(err)
							return
						}
						if n++; n == 2000 {
							return
						}
					}
				})
			}
			wg.Wait()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*2000*streams), "ns/delivery")
	})
}
