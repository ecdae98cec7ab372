package sqlite

import (
	"bytes"
	"context"
	"sync/atomic"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// tailSlots is how many of the log's rows, by position, the followers of
// FollowLog share: the ledger's tail, which every stream of a relay reads
// at about the same time, and a few pages behind it.
const tailSlots = 1024

// tailMaxData is the largest row data the tail keeps: a slot holds its
// row until a row 1 024 positions on takes it, so without a bound the
// tail would hold 1 024 of the largest rows a sender can make (an
// envelope of 1 MiB is a row of over 2 MiB) for as long as the relay
// runs. With it, the tail holds at most tailSlots×tailMaxData (64 MiB);
// followers read a larger row from SQLite, as each did before.
const tailMaxData = 64 << 10

// tail holds the rows FollowLog's followers read last, so that a row
// read by one follower is not read again from SQLite by every other: each
// connected harness of a relay follows the log, and a page read cost each
// of them about as much per row as deciding the row's delivery
// (docs/performance.md, "Session 14"). A committed row never changes and
// its position (rowid) is never reused (Store.Log), so a slot that holds
// a position holds that row. A follower takes the run of consecutive
// positions it finds after its own and reads the rest from SQLite, which
// also tells it where the log ends: the cache only saves reads, it never
// decides what exists.
type tail struct {
	slots [tailSlots]atomic.Pointer[ledger.Logged]
}

// run appends to page the rows at after+1, after+2, … the tail holds, at
// most limit in all, each with its own copy of the event's data.
func (t *tail) run(page []ledger.Logged, after int64, limit int) []ledger.Logged {
	for p := after + 1; len(page) < limit; p++ {
		l := t.slots[uint64(p)%tailSlots].Load()
		if l == nil || l.Pos != p {
			break
		}
		c := *l
		c.Data = bytes.Clone(l.Data)
		page = append(page, c)
	}
	return page
}

// keep puts rows read from SQLite in the tail, but those whose data is
// over tailMaxData.
func (t *tail) keep(rows []ledger.Logged) {
	for _, l := range rows {
		if len(l.Data) > tailMaxData {
			continue // the slot's older row, at another position, stays
		}
		c := l
		c.Data = bytes.Clone(l.Data) // the caller's copy is its own
		t.slots[uint64(l.Pos)%tailSlots].Store(&c)
	}
}

// followLogPage is FollowLog's page read: the rows after after that the
// tail holds, then the rest from SQLite in one of s.followReads — looking
// at the tail again once it has the slot, as the followers woken by the
// same commit queue there and the first one's read fills it.
func (s *Store) followLogPage(ctx context.Context, after int64) ([]ledger.Logged, error) {
	page := s.tail.run(nil, after, followPage)
	if len(page) == followPage {
		return page, nil
	}
	return followRead(ctx, s, func() ([]ledger.Logged, error) {
		page = s.tail.run(page, lastPos(page, after), followPage)
		if len(page) == followPage {
			return page, nil
		}
		rest, err := s.Log(ctx, lastPos(page, after), followPage-len(page))
		if err != nil {
			return nil, err
		}
		s.tail.keep(rest)
		return append(page, rest...), nil
	})
}

// lastPos is the position of page's last row, or after when it is empty.
func lastPos(page []ledger.Logged, after int64) int64 {
	if len(page) == 0 {
		return after
	}
	return page[len(page)-1].Pos
}
