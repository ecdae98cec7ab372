package metrics_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
	"github.com/crosstalk-go/crosstalk/gateway/metrics"
)

// BenchmarkIngest measures what the hooks add to Relay.Ingest: compare
// the two sub-benchmarks of one run (docs/operations.md).
func BenchmarkIngest(b *testing.B) {
	e := envelope.New("CLAUDE", "CHATGPT", envelope.IntentRequest, "Is the deploy blocked?")
	e.Context = "deploy"
	for _, withMetrics := range []bool{false, true} {
		b.Run(fmt.Sprintf("metrics=%v", withMetrics), func(b *testing.B) {
			var st ledger.Store = memory.New(nil)
			opts := &gateway.Options{}
			if withMetrics {
				m := metrics.New(nil)
				st, opts.Observer = m.Store(st), m
			}
			r := gateway.New(st, opts)
			for i := 0; b.Loop(); i++ {
				e.Message = fmt.Sprintf("01M89N4EQM5ZKPYKJ74D%06d", i)
				text, _ := envelope.Marshal(e)
				if _, err := r.Ingest(context.Background(), gateway.Intake{Transport: "http", Data: strings.NewReader(string(text))}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkScrape measures a scrape of a relay whose ledger holds 100
// groups of 1000 requests, the last 10 of each group in the last 5
// minutes: the first scrape (which reads every event once and decides the
// recent ones) and the following ones (which read only what is new:
// nothing).
func BenchmarkScrape(b *testing.B) {
	now := time.Now().Add(-48 * time.Hour)
	st := memory.New(func() time.Time { return now })
	book, _ := gateway.NewAddressBook([]gateway.Agent{{ID: "claude"}, {ID: "chatgpt"}})
	r := gateway.New(st, &gateway.Options{Book: book})
	for i := range 1000 {
		now = now.Add(time.Second)
		if i == 990 {
			now = time.Now().Add(-2 * time.Minute)
		}
		for g := range 100 {
			e := envelope.New("CLAUDE", "CHATGPT", envelope.IntentRequest, "x")
			e.Context = fmt.Sprintf("g%d", g)
			e.Message = fmt.Sprintf("01M89N4EQM5ZKPYKJ7%03d%05d", g, i)
			bs, _ := envelope.Marshal(e)
			if _, err := r.Ingest(context.Background(), gateway.Intake{Transport: "http", Data: strings.NewReader(string(bs))}); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, first := range []bool{true, false} {
		b.Run(fmt.Sprintf("first=%v", first), func(b *testing.B) {
			m := metrics.New(&metrics.Options{NoRuntime: true})
			m.WatchRelay(r)
			if !first {
				m.Registry().Gather()
			}
			for b.Loop() {
				if first {
					b.StopTimer()
					m = metrics.New(&metrics.Options{NoRuntime: true})
					m.WatchRelay(r)
					b.StartTimer()
				}
				if _, err := m.Registry().Gather(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
