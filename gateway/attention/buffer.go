package attention

import (
	"slices"
	"time"
)

// Buffering defaults (docs/design.md §5.4: quiet 3 s, at most 30 s; C2A "buffered":
// wait 2 to 5 s after the latest message, merge same-author fragments for
// up to 30 s).
const (
	DefaultQuiet     = 3 * time.Second
	DefaultMaxWindow = 30 * time.Second
)

// Fragment is one buffered delivery waiting to be injected: an event the
// relay decided to show agent Agent with injection buffered.
type Fragment struct {
	Agent   string    `json:"agent"`            // the receiving agent
	Group   string    `json:"group,omitempty"`  // Event.Group
	Thread  string    `json:"thread,omitempty"` // Event.Thread
	Author  string    `json:"author"`           // Event.From
	EventID string    `json:"event_id"`         // Event.ID
	Seq     int64     `json:"seq"`              // Event.Seq
	At      time.Time `json:"at"`               // when the event was appended
	// Immediate flushes the fragment's batch at once, with whatever was
	// already buffered for the same author and thread (an urgent follow-up
	// must not overtake the fragments it follows).
	Immediate bool `json:"immediate,omitempty"`
	// Supersedes names an earlier event this one edits; when both are in
	// one batch the earlier one is dropped (C2A "Edits, Deletes, And
	// Fragments": inject edits made before injection).
	Supersedes string `json:"supersedes,omitempty"`
}

// Batch is fragments merged into one model turn: same agent, group, thread
// and author.
type Batch struct {
	Agent    string   `json:"agent"`            // the receiving agent
	Group    string   `json:"group,omitempty"`  // the fragments' group
	Thread   string   `json:"thread,omitempty"` // the fragments' thread
	Author   string   `json:"author"`           // the fragments' author
	EventIDs []string `json:"event_ids"`        // in (At, Seq) order, superseded ones left out
	// Superseded lists events of the batch dropped because a later
	// fragment edits them; their disposition is superseded.
	Superseded []string `json:"superseded,omitempty"`
	// FirstSeq and LastSeq span every fragment of the batch, superseded
	// ones included.
	FirstSeq int64     `json:"first_seq"`
	LastSeq  int64     `json:"last_seq"`
	First    time.Time `json:"first"` // At of the earliest fragment
	Last     time.Time `json:"last"`  // At of the latest fragment
}

// Buffer holds the buffering windows. Zero fields mean the defaults.
type Buffer struct {
	// Quiet is how long after an author's latest fragment the batch is
	// injected.
	Quiet time.Duration
	// MaxWindow bounds a batch: a fragment at or after First+MaxWindow
	// starts a new batch, and a batch is injected at First+MaxWindow even
	// if the author keeps typing.
	MaxWindow time.Duration
}

// Merge is Buffer{}.Merge: quiet 3 s, window 30 s.
func Merge(pending []Fragment, now time.Time) (ready []Batch, rest []Fragment, nextWake time.Time) {
	return Buffer{}.Merge(pending, now)
}

type fragKey struct{ agent, group, thread, author string }

// Merge groups pending fragments by (agent, group, thread, author) and
// splits each group into batches: a fragment joins the current batch when
// it comes less than Quiet after the previous fragment and less than
// MaxWindow after the batch's first. A batch is ready when now is at least
// Quiet after its last fragment or MaxWindow after its first, when a later
// batch of the same group exists, or when it holds an Immediate fragment.
//
// ready is ordered by First (then agent, group, thread, author); rest holds
// the fragments not yet ready, in input order; nextWake is the earliest
// time a rest batch becomes ready by the clock (zero when rest is empty).
// Fragments of different authors, threads, groups or agents never merge.
func (b Buffer) Merge(pending []Fragment, now time.Time) (ready []Batch, rest []Fragment, nextWake time.Time) {
	quiet, maxw := b.Quiet, b.MaxWindow
	if quiet <= 0 {
		quiet = DefaultQuiet
	}
	if maxw <= 0 {
		maxw = DefaultMaxWindow
	}
	groups := map[fragKey][]int{}
	var keys []fragKey
	for i, f := range pending {
		k := fragKey{f.Agent, f.Group, f.Thread, f.Author}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], i)
	}
	held := make([]bool, len(pending))
	for _, k := range keys {
		idx := groups[k]
		slices.SortStableFunc(idx, func(a, b int) int {
			if c := pending[a].At.Compare(pending[b].At); c != 0 {
				return c
			}
			switch {
			case pending[a].Seq < pending[b].Seq:
				return -1
			case pending[a].Seq > pending[b].Seq:
				return 1
			}
			return 0
		})
		// Split into windows.
		var windows [][]int
		for n, i := range idx {
			if n > 0 {
				w := windows[len(windows)-1]
				first, prev := pending[w[0]].At, pending[w[len(w)-1]].At
				if pending[i].At.Sub(prev) < quiet && pending[i].At.Sub(first) < maxw {
					windows[len(windows)-1] = append(w, i)
					continue
				}
			}
			windows = append(windows, []int{i})
		}
		for wi, w := range windows {
			first, last := pending[w[0]].At, pending[w[len(w)-1]].At
			due := last.Add(quiet)
			if m := first.Add(maxw); m.Before(due) {
				due = m
			}
			isReady := wi < len(windows)-1 || !now.Before(due)
			for _, i := range w {
				isReady = isReady || pending[i].Immediate
			}
			if !isReady {
				for _, i := range w {
					held[i] = true
				}
				if nextWake.IsZero() || due.Before(nextWake) {
					nextWake = due
				}
				continue
			}
			ready = append(ready, batchOf(pending, w))
		}
	}
	for i, f := range pending {
		if held[i] {
			rest = append(rest, f)
		}
	}
	slices.SortStableFunc(ready, func(a, b Batch) int {
		if c := a.First.Compare(b.First); c != 0 {
			return c
		}
		for _, p := range [][2]string{{a.Agent, b.Agent}, {a.Group, b.Group}, {a.Thread, b.Thread}, {a.Author, b.Author}} {
			switch {
			case p[0] < p[1]:
				return -1
			case p[0] > p[1]:
				return 1
			}
		}
		return 0
	})
	return ready, rest, nextWake
}

func batchOf(pending []Fragment, w []int) Batch {
	f0, fl := pending[w[0]], pending[w[len(w)-1]]
	b := Batch{
		Agent: f0.Agent, Group: f0.Group, Thread: f0.Thread, Author: f0.Author,
		FirstSeq: f0.Seq, LastSeq: fl.Seq, First: f0.At, Last: fl.At,
	}
	dropped := map[string]bool{}
	for _, i := range w {
		if s := pending[i].Supersedes; s != "" && s != pending[i].EventID {
			dropped[s] = true
		}
	}
	for _, i := range w {
		b.FirstSeq = min(b.FirstSeq, pending[i].Seq)
		b.LastSeq = max(b.LastSeq, pending[i].Seq)
		if id := pending[i].EventID; dropped[id] {
			b.Superseded = append(b.Superseded, id)
		} else {
			b.EventIDs = append(b.EventIDs, id)
		}
	}
	return b
}
