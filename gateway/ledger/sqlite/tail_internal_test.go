package sqlite

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// TestFollowLogTail checks FollowLog's shared tail: a follower takes the
// consecutive rows the tail holds after its position and reads the rest
// from SQLite (a row planted in the tail proves which came from where);
// rows the tail lacks in the middle of a run are read, not skipped; and a
// follower that changes a row's data changes nobody else's.
func TestFollowLogTail(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 10 {
		if _, err := s.Append(ctx, []ledger.Record{{Kind: ledger.KindMessage, GroupID: "g", By: "a", Data: []byte(fmt.Sprintf(`{"text":"%d"}`, i))}}); err != nil {
			t.Fatal(err)
		}
	}
	all, err := s.Log(ctx, 0, 100)
	if err != nil || len(all) != 10 {
		t.Fatalf("Log = %d rows, %v", len(all), err)
	}
	texts := func(page []ledger.Logged) string {
		var out string
		for _, l := range page {
			out += fmt.Sprintf("%d:%s ", l.Pos, l.Data)
		}
		return out
	}
	want := texts(all)
	if got, err := s.followLogPage(ctx, 0); err != nil || texts(got) != want {
		t.Fatalf("first read = %s, %v; want %s", texts(got), err, want)
	}
	// The tail now holds every row: plant a marker in the row at 2.
	planted := *s.tail.slots[2%tailSlots].Load()
	planted.Data = []byte("from the tail")
	s.tail.slots[2%tailSlots].Store(&planted)
	// And forget the row at 5: the follower must read it, and what follows.
	s.tail.slots[5%tailSlots].Store(nil)
	got, err := s.followLogPage(ctx, 1)
	if err != nil || len(got) != 9 || string(got[0].Data) != "from the tail" || texts(got[1:]) != texts(all[2:]) {
		t.Fatalf("second read = %s, %v; want the planted row 2, then rows 3–10 as logged", texts(got), err)
	}
	got[1].Data[0] = 'X' // a follower changing its copy
	again, err := s.followLogPage(ctx, 2)
	if err != nil || texts(again) != texts(all[2:]) {
		t.Errorf("third read = %s, %v; want %s: one follower's change reached another", texts(again), err, texts(all[2:]))
	}
	if got, err := s.followLogPage(ctx, 10); err != nil || len(got) != 0 {
		t.Errorf("read at the end = %s, %v; want nothing", texts(got), err)
	}
}

// TestFollowLogTailConcurrent has many followers follow the log while
// appends go on, and checks under -race that each sees every row once, in
// order, with its own data.
func TestFollowLogTailConcurrent(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const followers, events = 8, 600
	var wg sync.WaitGroup
	errs := make(chan error, followers)
	for f := range followers {
		wg.Go(func() {
			next := int64(1)
			for l, err := range s.FollowLog(ctx, 0) {
				if err != nil {
					errs <- err
					return
				}
				if l.Pos != next || string(l.Data) != fmt.Sprintf(`{"text":"%d"}`, next) {
					errs <- fmt.Errorf("follower %d: row %d %s, want %d", f, l.Pos, l.Data, next)
					return
				}
				l.Data[2] = 'X' // its own copy
				if next++; next > events {
					return
				}
			}
		})
	}
	for i := 1; i <= events; i++ {
		if _, err := s.Append(ctx, []ledger.Record{{Kind: ledger.KindMessage, GroupID: fmt.Sprint("g", i%7), By: "a", Data: []byte(fmt.Sprintf(`{"text":"%d"}`, i))}}); err != nil {
			t.Fatal(err)
		}
		if i%50 == 0 {
			time.Sleep(time.Millisecond) // let followers reach the tail now and then
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestFollowLogTailBoundsBytes: the tail keeps 1 024 rows for as long as
// no newer row takes their slot, so what it holds must not be 1 024 of the
// largest rows a sender can make (an envelope of 1 MiB is a row of 2 MiB
// and more): after followers read 16 rows of 1 MiB, it holds less than 1
// MiB of their data, and followers still read each row whole, in order.
func TestFollowLogTailBoundsBytes(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	text := func(i int) string {
		if i%4 == 3 {
			return fmt.Sprint(i)
		}
		return fmt.Sprint(i, " ", strings.Repeat("x", 1<<20))
	}
	const rows = 16
	for i := range rows {
		if _, err := s.Append(ctx, []ledger.Record{{Kind: ledger.KindMessage, GroupID: "g", By: "a", Data: []byte(fmt.Sprintf(`{"text":%q}`, text(i)))}}); err != nil {
			t.Fatal(err)
		}
	}
	for follower := range 2 {
		var after int64
		for after < rows {
			page, err := s.followLogPage(ctx, after)
			if err != nil || len(page) == 0 {
				t.Fatalf("follower %d: read after %d = %d rows, %v", follower, after, len(page), err)
			}
			for _, l := range page {
				if l.Pos != after+1 || string(l.Data) != fmt.Sprintf(`{"text":%q}`, text(int(after))) {
					t.Fatalf("follower %d: row %d (%d bytes), want row %d as appended", follower, l.Pos, len(l.Data), after+1)
				}
				after = l.Pos
			}
		}
	}
	held := 0
	for i := range s.tail.slots {
		if l := s.tail.slots[i].Load(); l != nil {
			held += len(l.Data)
		}
	}
	if held >= 1<<20 {
		t.Errorf("the tail holds %d bytes of row data after 16 rows of 1 MiB", held)
	}
}
