package jetstream_test

import (
	"fmt"
	"github.com/crosstalk-go/crosstalk/internal/natstest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/jetstream"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/sqlite"
)

// benchClients is the number of concurrent appenders, the relay's design
// load (the same as the sqlite package's group-commit benchmark).
const benchClients = 64

// benchRecord is the sqlite benchmark's record: four groups, a dedupe
// key each, a typical chat message.
func benchRecord(i int64) ledger.Record {
	return ledger.Record{
		Kind: "chat.message", GroupID: fmt.Sprintf("g%d", i%4), By: "claude",
		Data:      []byte(`{"text":"Please review the release checklist today.","to":["@foreman"],"priority":"attention"}`),
		DedupeKey: fmt.Sprintf("bench-%d", i),
	}
}

// runAppends appends b.N records, one per Append call, from benchClients
// goroutines spread over stores.
func runAppends(b *testing.B, stores []ledger.Store) {
	ctx := b.Context()
	var next atomic.Int64
	n := int64(b.N)
	b.ResetTimer()
	var wg sync.WaitGroup
	for c := range benchClients {
		s := stores[c%len(stores)]
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= n {
					return
				}
				if _, err := s.Append(ctx, []ledger.Record{benchRecord(i)}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
}

func reportBatches(b *testing.B, stores []*jetstream.Store) {
	var st jetstream.Stats
	for _, s := range stores {
		x := s.Stats()
		st.Batches += x.Batches
		st.Records += x.Records
		st.Conflicts += x.Conflicts
	}
	b.ReportMetric(float64(st.Records)/float64(max(st.Batches, 1)), "records/batch")
	b.ReportMetric(float64(st.Conflicts)/float64(b.N), "conflicts/op")
}

// BenchmarkAppend compares, in one run, 64 concurrent appenders on
//   - sqlite: the default store (WAL fsynced before every answer, group commit);
//   - jetstream/1node: one nats-server with sync_interval: always (every
//     acknowledged append fsynced, like sqlite);
//   - jetstream/1node-nosync: the same with nats-server's default
//     sync_interval (2 minutes): for comparison only, not durable;
//   - jetstream/3node-R3: a 3-node cluster, R3 stream, default sync
//     (acknowledged = on two of three servers), one Store (one relay);
//   - jetstream/3node-R3-3relays: the same cluster, three Stores on
//     their own connections (three relays), the clients spread over them.
//
// Servers are set up again for every b.N; run with a fixed count, e.g.
// -benchtime=5000x.
func BenchmarkAppend(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) {
		s, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "ledger.db"), nil)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		runAppends(b, []ledger.Store{s})
	})
	js := func(b *testing.B, url string, replicas, relays int) {
		stream := uniqueStream()
		var stores []ledger.Store
		var jss []*jetstream.Store
		for range relays {
			s, err := jetstream.Open(b.Context(), url, &jetstream.Options{Stream: stream, Replicas: replicas})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			stores = append(stores, s)
			jss = append(jss, s)
		}
		runAppends(b, stores)
		reportBatches(b, jss)
	}
	b.Run("jetstream/1node", func(b *testing.B) {
		js(b, startSingle(b), 1, 1)
	})
	b.Run("jetstream/1node-nosync", func(b *testing.B) {
		js(b, natstest.Single(b, false).URL, 1, 1)
	})
	b.Run("jetstream/3node-R3", func(b *testing.B) {
		js(b, natstest.URLs(startCluster(b)), 3, 1)
	})
	b.Run("jetstream/3node-R3-3relays", func(b *testing.B) {
		js(b, natstest.URLs(startCluster(b)), 3, 3)
	})
}
