package projection_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway/projection"
	"github.com/crosstalk-go/crosstalk/internal/cputime"
)

// ledgerSim makes the facts the relay derives from its own envelopes
// (gateway.Relay.factsOf), in log order: REQUESTs from BENCH to READER
// that each start a thread (two joins, an owe item, an owed row), and,
// in the mixed workload, READER's acks and replies that settle earlier
// ones (marks, settles, answers).
type ledgerSim struct {
	pos, seq int64
	groups   []string
	// open are the requests not yet acked or answered, oldest first.
	open []simRequest
	n    int
}

type simRequest struct {
	group, event, msg string
}

func newLedgerSim(groups int) *ledgerSim {
	s := &ledgerSim{}
	for g := range groups {
		s.groups = append(s.groups, fmt.Sprintf("bench-%d", g))
	}
	return s
}

func (s *ledgerSim) next(f *projection.Facts) {
	s.pos++
	s.seq++
	s.n++
	group := s.groups[s.n%len(s.groups)]
	*f = projection.Facts{Pos: s.pos, Group: group, Seq: s.seq, EventID: envelope.NewID(),
		TS: time.UnixMilli(1_700_000_000_000 + s.pos).UTC().Format("2006-01-02T15:04:05.000Z")}
}

// request is a REQUEST from BENCH to READER starting its own thread.
func (s *ledgerSim) request(f *projection.Facts) {
	s.next(f)
	msg := envelope.NewID()
	f.Joins = []projection.Join{{Thread: msg, Kind: projection.JoinAuthor, Token: "BENCH"}, {Thread: msg, Kind: projection.JoinNamed, Token: "READER"}}
	f.Actors = []projection.ActorFact{{ID: "bench", Wrote: true}, {ID: "reader", Addressed: true, Owes: true, Msg: msg}}
	f.Owes = []projection.Owe{{Token: "reader"}}
	s.open = append(s.open, simRequest{f.Group, f.EventID, msg})
}

// ack is READER's chat.ack of its oldest open request.
func (s *ledgerSim) ack(f *projection.Facts) {
	r := s.open[0]
	s.open = s.open[1:]
	s.next(f)
	f.Group = r.group
	f.Marks = []projection.Mark{{Event: r.event, Kind: projection.MarkAck, Actor: "reader"}}
	f.Actors = []projection.ActorFact{{ID: "reader", Wrote: true, Settles: []string{r.event}}}
	f.Settles = []projection.Settle{{Event: r.event, Token: "reader", Ack: true}}
	f.Answers = []projection.Answer{{Event: r.event, Actor: "READER", Ack: true}}
}

// reply is READER's RESPONSE to its oldest open request, in its thread.
func (s *ledgerSim) reply(f *projection.Facts) {
	r := s.open[0]
	s.open = s.open[1:]
	s.next(f)
	f.Group = r.group
	f.Joins = []projection.Join{{Thread: r.msg, Kind: projection.JoinAuthor, Token: "READER"}, {Thread: r.msg, Kind: projection.JoinNamed, Token: "BENCH"}}
	f.Marks = []projection.Mark{{Event: r.event, Kind: projection.MarkResponded, Actor: "READER"}}
	f.Actors = []projection.ActorFact{{ID: "reader", Wrote: true, Settles: []string{r.msg}}, {ID: "bench", Addressed: true}}
	f.Settles = []projection.Settle{{Event: r.event, Token: "reader"}}
	f.Answers = []projection.Answer{{Event: r.event, Actor: "READER", Reply: true}}
}

// obligation is a HANDOFF-like obligation from BENCH to READER, named
// twice (as written and as the address book names it), that its ack
// settles.
func (s *ledgerSim) obligation(f *projection.Facts) {
	s.request(f)
	f.Owes = []projection.Owe{{Token: "reader", Obligation: true, Ack: true}, {Token: "reader", Obligation: true, Ack: true}, {Token: "@reviewer", Obligation: true}}
	f.Waits, f.WaitAuthor, f.WaitHandoff = []string{"bench"}, "BENCH", true
	f.Actors = append(f.Actors, f.Actors[1])
}

// discharge is BENCH's discharge of its oldest open request (an
// obligation or not).
func (s *ledgerSim) discharge(f *projection.Facts) {
	r := s.open[0]
	s.open = s.open[1:]
	s.next(f)
	f.Group = r.group
	f.Marks = []projection.Mark{{Event: r.event, Kind: projection.MarkDischarged}}
	f.Actors = []projection.ActorFact{{ID: "bench", Wrote: true}}
	f.Discharges, f.DischargedBy = r.event, "BENCH"
}

// batch fills fs with the next events: requests only, or one in four
// an ack or a reply of an earlier request when mixed.
func (s *ledgerSim) batch(fs []projection.Facts, mixed bool) {
	for i := range fs {
		switch {
		case mixed && s.n%8 == 3 && len(s.open) > 0:
			s.ack(&fs[i])
		case mixed && s.n%8 == 7 && len(s.open) > 0:
			s.reply(&fs[i])
		default:
			s.request(&fs[i])
		}
	}
}

// BenchmarkApply applies batches of events to a file-backed DB that
// already holds 16 384 events, and reports the time, the process's CPU
// time and the allocations per event. "requests" is the ingest
// benchmark's traffic (every envelope a REQUEST starting its own
// thread) and "mixed" adds READER's acks and replies (a quarter of the
// events), 64 events an Apply; "requests-256" is the ingest traffic
// 256 events an Apply, as the relay's sync (one per 50 ms) applies it
// under load; "rebuild" is the mixed traffic 4096 an Apply, as a rebuild
// (`crosstalk ledger reindex`) applies the log.
func BenchmarkApply(b *testing.B) {
	const prefill = 16384
	for _, bb := range []struct {
		name  string
		mixed bool
		batch int
	}{{"requests", false, 64}, {"requests-256", false, 256}, {"mixed", true, 64}, {"rebuild", true, 4096}} {
		b.Run(bb.name, func(b *testing.B) {
			ctx := context.Background()
			db, err := projection.Open(ctx, filepath.Join(b.TempDir(), "p.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			sim := newLedgerSim(4)
			fs := make([]projection.Facts, bb.batch)
			for range prefill / bb.batch {
				sim.batch(fs, bb.mixed)
				if err := db.Apply(ctx, fs); err != nil {
					b.Fatal(err)
				}
			}
			var mallocs uint64
			var cpu time.Duration
			var ms runtime.MemStats
			b.ResetTimer()
			for b.Loop() {
				b.StopTimer()
				sim.batch(fs, bb.mixed)
				runtime.ReadMemStats(&ms)
				before, cpu0 := ms.Mallocs, cputime.Process()
				b.StartTimer()
				if err := db.Apply(ctx, fs); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				cpu += cputime.Process() - cpu0
				runtime.ReadMemStats(&ms)
				mallocs += ms.Mallocs - before
				b.StartTimer()
			}
			events := float64(b.N * bb.batch)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/events, "ns/event")
			b.ReportMetric(float64(cpu.Nanoseconds())/events, "cpu-ns/event")
			b.ReportMetric(float64(mallocs)/events, "allocs/event")
		})
	}
}

// One event naming n distinct recipients in one thread (a POLL's
// Targets line holds thousands): the joins an Apply gathers.
func BenchmarkApplyWideEvent(b *testing.B) {
	for _, n := range []int{1000, 4000, 16000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			ctx := context.Background()
			for i := range b.N {
				db, err := projection.Open(ctx, filepath.Join(b.TempDir(), fmt.Sprint(i)))
				if err != nil {
					b.Fatal(err)
				}
				f := projection.Facts{Pos: 1, Group: "g", Seq: 1, EventID: "E1", TS: "t"}
				for k := range n {
					f.Joins = append(f.Joins, projection.Join{Thread: "T", Kind: projection.JoinNamed, Token: fmt.Sprintf("agent-%06d", k)})
				}
				if err := db.Apply(ctx, []projection.Facts{f}); err != nil {
					b.Fatal(err)
				}
				db.Close()
			}
		})
	}
}

// A thread that grows by one participant per Apply (one event a sync):
// the whole thread's row is read, merged and rewritten each time.
func BenchmarkApplyGrowingThread(b *testing.B) {
	for _, n := range []int{1000, 4000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			ctx := context.Background()
			for i := range b.N {
				db, err := projection.Open(ctx, filepath.Join(b.TempDir(), fmt.Sprint(i)))
				if err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				for k := range n {
					f := projection.Facts{Pos: int64(k + 1), Group: "g", Seq: int64(k + 1), EventID: fmt.Sprintf("E%06d", k), TS: "t",
						Joins: []projection.Join{{Thread: "T", Kind: projection.JoinNamed, Token: fmt.Sprintf("agent-%06d", k)}}}
					if err := db.Apply(ctx, []projection.Facts{f}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(time.Since(start).Microseconds())/float64(n), "µs/apply")
				db.Close()
			}
		})
	}
}
