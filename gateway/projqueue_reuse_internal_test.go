package gateway

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway/projection"
)

// refQueue is projQueue as it was before it reused its buffers: every
// take copied the queue into held and cloned the run out of it. It is
// the reference TestProjQueueReuse compares with.
type refQueue struct {
	in    []projection.Facts
	stale bool
	held  []projection.Facts
	gapAt int64
}

func (q *refQueue) add(facts []projection.Facts, stale bool) {
	q.stale = q.stale || stale || len(q.in)+len(facts) > projQueueMax
	if q.stale {
		q.in = nil
	} else {
		q.in = append(q.in, facts...)
	}
}

func (q *refQueue) take(after, now int64) ([]projection.Facts, bool) {
	in, stale := q.in, q.stale
	q.in = nil
	q.held = append(q.held, in...)
	if stale || len(q.held) > projQueueMax {
		q.stale = true
		q.held, q.gapAt = nil, 0
		return nil, true
	}
	slices.SortFunc(q.held, func(a, b projection.Facts) int { return cmp.Compare(a.Pos, b.Pos) })
	i := 0
	for i < len(q.held) && q.held[i].Pos <= after {
		i++
	}
	n := i
	for n < len(q.held) && q.held[n].Pos == after+1+int64(n-i) {
		n++
	}
	run := slices.Clone(q.held[i:n])
	q.held = slices.Delete(q.held, 0, n)
	switch {
	case len(q.held) == 0:
		q.gapAt = 0
	case len(run) > 0 || q.gapAt == 0:
		q.gapAt = now
	case now-q.gapAt > int64(projGapWait):
		return run, true
	}
	return run, false
}

func (q *refQueue) applied(upTo int64) {
	done := func(f projection.Facts) bool { return f.Pos <= upTo }
	q.in = slices.DeleteFunc(q.in, done)
	q.held = slices.DeleteFunc(q.held, done)
	if len(q.held) == 0 {
		q.gapAt = 0
	}
}

// TestProjQueueReuse runs random appends (out of order, with gaps that
// fill late or never, appends without positions, log reads) through
// projQueue and refQueue and checks that every take returns the same
// run, with each fact intact, and that a run stays intact while appends
// go on until the next take (which reuses its room).
func TestProjQueueReuse(t *testing.T) {
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 7))
		var q projQueue
		var ref refQueue
		fact := func(pos int64) projection.Facts {
			return projection.Facts{Pos: pos, EventID: fmt.Sprint("e", pos), Group: "g", Owes: []projection.Owe{{Token: fmt.Sprint("t", pos)}}}
		}
		check := func(run []projection.Facts) {
			t.Helper()
			for _, f := range run {
				if f.EventID != fmt.Sprint("e", f.Pos) || len(f.Owes) != 1 || f.Owes[0].Token != fmt.Sprint("t", f.Pos) {
					t.Fatalf("seed %d: run holds a fact overwritten: %+v", seed, f)
				}
			}
		}
		var next, after, now int64 // the next position to hand out, the mark, the clock
		var late []int64           // positions handed out, not yet added (a gap)
		logs, gaps := 0, 0
		for step := range 400 {
			// Appends: a few new positions, some held back for later
			// (a gap), added in shuffled batches.
			var batch []projection.Facts
			for range rng.IntN(40) {
				next++
				if rng.IntN(10) == 0 {
					late = append(late, next)
					continue
				}
				batch = append(batch, fact(next))
			}
			if len(late) > 0 && rng.IntN(3) == 0 {
				k := rng.IntN(len(late))
				batch = append(batch, fact(late[k]))
				late = slices.Delete(late, k, k+1)
			}
			rng.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
			stale := rng.IntN(50) == 0
			for len(batch) > 0 {
				k := 1 + rng.IntN(len(batch))
				q.add(slices.Clone(batch[:k]), stale)
				ref.add(slices.Clone(batch[:k]), stale)
				batch = batch[k:]
			}
			now += int64(rng.IntN(int(projGapWait / 2)))
			run, log := q.take(after, now)
			want, wantLog := ref.take(after, now)
			posOf := func(fs []projection.Facts) []int64 {
				out := make([]int64, len(fs))
				for i, f := range fs {
					out[i] = f.Pos
				}
				return out
			}
			if !slices.Equal(posOf(run), posOf(want)) || log != wantLog {
				t.Fatalf("seed %d step %d: take(%d) = %v, %v; want %v, %v", seed, step, after, posOf(run), log, posOf(want), wantLog)
			}
			check(run)
			if len(q.held) > 0 {
				gaps++
			}
			// Appends while the run is applied: they must not touch it.
			before := slices.Clone(run)
			for range rng.IntN(5) {
				next++
				f := []projection.Facts{fact(next)}
				q.add(f, false)
				ref.add(slices.Clone(f), false)
			}
			if !slices.EqualFunc(run, before, func(a, b projection.Facts) bool { return a.Pos == b.Pos && a.EventID == b.EventID }) {
				t.Fatalf("seed %d step %d: appends after the take changed its run", seed, step)
			}
			if len(run) > 0 {
				after = run[len(run)-1].Pos
			}
			if log {
				logs++
				// The caller reads the log up to its end.
				q.readLog()
				ref.stale = false
				after, late = next, nil
				q.applied(after)
				ref.applied(after)
			}
		}
		if logs == 0 || gaps == 0 {
			t.Errorf("seed %d: %d log reads, %d takes that held a gap: the steps do not exercise them", seed, logs, gaps)
		}
	}
}
