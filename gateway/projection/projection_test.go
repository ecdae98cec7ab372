package projection_test

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/crosstalk-go/crosstalk/gateway/projection"
)

// facts returns the facts of a small ledger: bob asks carol in thread T
// (carol owes it), carol acks and replies, the message is claimed.
func facts() []projection.Facts {
	return []projection.Facts{
		{Pos: 1, Group: "g", Seq: 1, EventID: "e1", TS: "t1",
			Joins:  []projection.Join{{Thread: "T", Kind: projection.JoinAuthor, Token: "bob"}, {Thread: "T", Kind: projection.JoinNamed, Token: "carol"}},
			Actors: []projection.ActorFact{{ID: "bob", Wrote: true}, {ID: "carol", Addressed: true, Owes: true, Msg: "m1"}}},
		{Pos: 3, Group: "g", Seq: 2, EventID: "e2", TS: "t2",
			Marks:  []projection.Mark{{Event: "e1", Kind: projection.MarkAck, Actor: "carol"}, {Event: "e1", Kind: projection.MarkClaimed}},
			Actors: []projection.ActorFact{{ID: "Carol", Wrote: true}}},
		{Pos: 4, Group: "g", Seq: 3, EventID: "e3", TS: "t3",
			Joins:  []projection.Join{{Thread: "T", Kind: projection.JoinAuthor, Token: "carol"}},
			Marks:  []projection.Mark{{Event: "e1", Kind: projection.MarkResponded, Actor: "carol"}},
			Actors: []projection.ActorFact{{ID: "carol", Wrote: true, Settles: []string{"m1"}}}},
	}
}

func open(t *testing.T, path string) *projection.DB {
	t.Helper()
	db, err := projection.Open(context.Background(), path)
	if err != nil {
		t.Fatalf("Open(%q) = %v", path, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestApply checks what Apply keeps, that applying again (or facts at or
// before the mark) changes nothing, and that the mark survives a reopen.
func TestApply(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "p.db")
	db := open(t, path)
	if err := db.Apply(ctx, facts()[:2]); err != nil {
		t.Fatal(err)
	}
	if err := db.Apply(ctx, facts()); err != nil { // the first two again
		t.Fatal(err)
	}
	once, err := db.Dump(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Apply(ctx, facts()); err != nil {
		t.Fatal(err)
	}
	twice, _ := db.Dump(ctx)
	if !slices.Equal(once, twice) {
		t.Fatalf("applying again changed the rows:\n%v\n%v", once, twice)
	}
	if err := db.Apply(ctx, facts()[:1]); err != nil { // all before the mark
		t.Fatal(err)
	}
	pos, id, err := db.HighWater(ctx)
	if pos != 4 || id != "e3" || err != nil {
		t.Fatalf("HighWater = %d, %q, %v; want 4, e3", pos, id, err)
	}
	joins, err := db.Joins(ctx, "g", "T")
	slices.SortFunc(joins, func(a, b projection.Join) int { return cmp.Or(cmp.Compare(a.Seq, b.Seq), cmp.Compare(a.Kind, b.Kind)) })
	wantJoins := []projection.Join{{Thread: "T", Kind: projection.JoinAuthor, Token: "bob", Seq: 1}, {Thread: "T", Kind: projection.JoinNamed, Token: "carol", Seq: 1},
		{Thread: "T", Kind: projection.JoinAuthor, Token: "carol", Seq: 3}}
	if err != nil || !slices.Equal(joins, wantJoins) {
		t.Fatalf("Joins = %+v, %v; want %+v", joins, err, wantJoins)
	}
	if joins, err := db.Joins(ctx, "g", "nope"); len(joins) != 0 || err != nil {
		t.Errorf("Joins of a thread nobody wrote in = %+v, %v", joins, err)
	}
	marks, err := db.Marks(ctx, "g", []string{"e1", "e2", "nope"})
	if err != nil || len(marks) != 3 {
		t.Fatalf("Marks = %+v, %v; want ack, claimed, responded", marks, err)
	}
	actors, err := db.Actors(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []projection.Actor{{ID: "bob", Events: 1, LastTS: "t1"}, {ID: "carol", Events: 2, Addressed: 1, LastTS: "t3"}}
	if !slices.Equal(actors, want) {
		t.Errorf("Actors = %+v, want %+v (carol's obligation settled by her reply)", actors, want)
	}
	db.Close()
	again := open(t, path)
	if pos, id, err := again.HighWater(ctx); pos != 4 || id != "e3" || err != nil {
		t.Fatalf("after a reopen, HighWater = %d, %q, %v; want 4, e3", pos, id, err)
	}
	if err := again.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if rows, _ := again.Dump(ctx); len(rows) != 3 { // meta only
		t.Errorf("after Reset, Dump = %v, want the meta rows only", rows)
	}
}

// TestMarksManyEvents asks the marks of more events than one query binds.
func TestMarksManyEvents(t *testing.T) {
	ctx := context.Background()
	db := open(t, "")
	var fs []projection.Facts
	var ids []string
	for i := range 1200 {
		id := fmt.Sprintf("e%d", i)
		ids = append(ids, id)
		fs = append(fs, projection.Facts{Pos: int64(i + 1), Group: "g", Seq: int64(i + 1), EventID: id,
			Marks: []projection.Mark{{Event: id, Kind: projection.MarkDischarged}}})
	}
	if err := db.Apply(ctx, fs); err != nil {
		t.Fatal(err)
	}
	marks, err := db.Marks(ctx, "g", ids)
	if err != nil || len(marks) != 1200 {
		t.Fatalf("Marks of 1200 events = %d, %v", len(marks), err)
	}
}

// Example applies the facts of two events and asks who took part in a
// thread, and since when.
func Example() {
	ctx := context.Background()
	db, err := projection.Open(ctx, "") // in memory; a file name for a durable one
	if err != nil {
		panic(err)
	}
	defer db.Close()
	err = db.Apply(ctx, []projection.Facts{
		{Pos: 1, Group: "g", Seq: 1, EventID: "e1", Joins: []projection.Join{{Thread: "T", Kind: projection.JoinAuthor, Token: "bob"}}},
		{Pos: 2, Group: "g", Seq: 2, EventID: "e2", Joins: []projection.Join{{Thread: "T", Kind: projection.JoinNamed, Token: "carol"}}},
	})
	if err != nil {
		panic(err)
	}
	joins, _ := db.Joins(ctx, "g", "T")
	slices.SortFunc(joins, func(a, b projection.Join) int { return int(a.Seq - b.Seq) })
	for _, j := range joins {
		fmt.Println(j.Token, "from seq", j.Seq)
	}
	pos, id, _ := db.HighWater(ctx)
	fmt.Println("applied up to", pos, id)
	// Output:
	// bob from seq 1
	// carol from seq 2
	// applied up to 2 e2
}

// TestOpenOtherSchema checks that a DB of another schema version is
// emptied on Open, to be rebuilt.
func TestOpenOtherSchema(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "p.db")
	db := open(t, path)
	if err := db.Apply(ctx, facts()); err != nil {
		t.Fatal(err)
	}
	db.Close()
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`UPDATE meta SET v = ? WHERE k = 'schema'`, projection.Schema+1); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	again := open(t, path)
	if pos, _, err := again.HighWater(ctx); pos != 0 || err != nil {
		t.Fatalf("HighWater of a DB of another schema = %d, %v; want 0", pos, err)
	}
	if rows, _ := again.Dump(ctx); len(rows) != 3 {
		t.Errorf("Dump = %v, want the meta rows only", rows)
	}
}

// TestJoinsKeepFirst applies a thread's joins over several Applies and
// within one: a token that joins again keeps the seq it first joined
// at, and the Dump lines do not depend on how the facts were batched.
func TestJoinsKeepFirst(t *testing.T) {
	join := func(kind projection.JoinKind, token string) projection.Join {
		return projection.Join{Thread: "T", Kind: kind, Token: token}
	}
	fs := []projection.Facts{
		{Pos: 1, Group: "g", Seq: 1, EventID: "e1", Joins: []projection.Join{join(projection.JoinAuthor, "bob"), join(projection.JoinNamed, "carol"), join(projection.JoinNamed, "carol")}},
		{Pos: 2, Group: "g", Seq: 2, EventID: "e2", Joins: []projection.Join{join(projection.JoinAuthor, "carol"), join(projection.JoinNamed, "bob")}},
		{Pos: 3, Group: "g", Seq: 3, EventID: "e3", Joins: []projection.Join{join(projection.JoinAuthor, "bob"), join(projection.JoinNamed, "Carol"),
			{Thread: "U", Kind: projection.JoinNamed, Token: "bob"}}},
		{Pos: 4, Group: "h", Seq: 1, EventID: "e4", Joins: []projection.Join{join(projection.JoinAuthor, "dave")}},
	}
	want := []string{
		"join|g|T|1|bob|1", "join|g|T|1|carol|2", "join|g|T|2|Carol|3", "join|g|T|2|bob|2", "join|g|T|2|carol|1",
		"join|g|U|2|bob|3", "join|h|T|1|dave|1",
	}
	for _, size := range []int{len(fs), 1, 2} {
		var got []string
		for _, r := range dumpApplied(t, fs, size) {
			if strings.HasPrefix(r, "join|") {
				got = append(got, r)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("applied %d at a time, the joins are\n%q\nwant\n%q", size, got, want)
		}
	}
}

// dumpApplied applies fs to a new file DB, size facts an Apply, and
// returns its Dump.
func dumpApplied(t *testing.T, fs []projection.Facts, size int) []string {
	t.Helper()
	ctx := context.Background()
	db := open(t, filepath.Join(t.TempDir(), "p.db"))
	for rest := fs; len(rest) > 0; {
		n := min(size, len(rest))
		if err := db.Apply(ctx, rest[:n]); err != nil {
			t.Fatal(err)
		}
		rest = rest[n:]
	}
	rows, err := db.Dump(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestApplyBatching applies the same facts one event per Apply, in
// batches of several sizes and all at once: requests, obligations named
// twice, acks, replies and discharges of items still gathered in the
// same Apply or applied before. The rows must not depend on the
// batching (the relay applies a few events per append, a rebuild 4096).
func TestApplyBatching(t *testing.T) {
	sim := newLedgerSim(3)
	var fs []projection.Facts
	for i := range 700 {
		var f projection.Facts
		switch {
		case i%10 == 4:
			sim.obligation(&f)
		case i%10 == 9 && len(sim.open) > 0:
			sim.discharge(&f)
		case i%5 == 2 && len(sim.open) > 0:
			sim.ack(&f)
		case i%5 == 3 && len(sim.open) > 0:
			sim.reply(&f)
		default:
			sim.request(&f)
		}
		fs = append(fs, f)
	}
	want := dumpApplied(t, fs, len(fs))
	for _, size := range []int{1, 3, 64, 300} {
		if rows := dumpApplied(t, fs, size); !slices.Equal(rows, want) {
			t.Errorf("applied %d at a time, Dump differs from all at once:\n%q\nwant\n%q", size, rows, want)
		}
	}
	for _, kind := range []string{"owe|", "owed|", "wait|", "evidence|"} {
		if !slices.ContainsFunc(want, func(r string) bool { return strings.HasPrefix(r, kind) }) {
			t.Errorf("no %s rows: the facts do not exercise them", kind)
		}
	}
}

// TestJoinsBlobMalformed: a thread's joins row whose blob ends in bytes
// the reader cannot read (a torn or hostile projection file) keeps its
// readable joins, and the thread's later joins are not stored behind the
// garbage where no read finds them: the row is repaired.
func TestJoinsBlobMalformed(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "p.db")
	db, err := projection.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	join := func(pos int64, token string) projection.Facts {
		return projection.Facts{Pos: pos, Group: "g", Seq: pos, EventID: "E" + token, TS: "t",
			Joins: []projection.Join{{Thread: "T", Kind: projection.JoinAuthor, Token: token}}}
	}
	if err := db.Apply(ctx, []projection.Facts{join(1, "alice")}); err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("sqlite", path) // the same file, as another writer
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	// A join whose token length (a uvarint) runs past the end.
	if _, err := raw.ExecContext(ctx, `UPDATE joins SET v = CAST(v || x'02ff' AS BLOB) WHERE thread = 'T'`); err != nil {
		t.Fatal(err)
	}
	if err := db.Apply(ctx, []projection.Facts{join(2, "bob")}); err != nil {
		t.Fatal(err)
	}
	joins, err := db.Joins(ctx, "g", "T")
	if err != nil {
		t.Fatal(err)
	}
	var alice, bob bool
	for _, j := range joins {
		bob = bob || j.Token == "bob"
		alice = alice || j.Token == "alice"
	}
	if !bob || !alice {
		t.Errorf("Joins(T) = %+v after bob wrote in T: bob's join is stored after bytes the reader stops at", joins)
	}
}

// TestApplyConflicts: rows that are already stored, or gathered twice in
// one Apply, go in once (the multi-row inserts ignore a taken key), in
// the same Apply or a later one, and an owed row that is not inserted
// does not count as owed again.
func TestApplyConflicts(t *testing.T) {
	ctx := context.Background()
	ask := func(pos int64, event string) projection.Facts {
		return projection.Facts{Pos: pos, Group: "g", Seq: pos, EventID: event, TS: fmt.Sprint("t", pos),
			Actors: []projection.ActorFact{{ID: "carol", Addressed: true, Owes: true, Msg: "m-" + event}},
			Owes:   []projection.Owe{{Token: "carol"}}}
	}
	ack := func(pos int64, event string) projection.Facts {
		return projection.Facts{Pos: pos, Group: "g", Seq: pos, EventID: fmt.Sprint("a", pos), TS: fmt.Sprint("t", pos),
			Marks: []projection.Mark{{Event: event, Kind: projection.MarkAck, Actor: "carol"}, {Event: event, Kind: projection.MarkAck, Actor: "carol"}}}
	}
	for _, tc := range []struct {
		name    string
		applies [][]projection.Facts
	}{
		{"one apply", [][]projection.Facts{{ask(1, "e1"), ack(2, "e1"), ack(3, "e1"), ask(4, "e1")}}},
		{"one at a time", [][]projection.Facts{{ask(1, "e1")}, {ack(2, "e1")}, {ack(3, "e1")}, {ask(4, "e1")}}},
		{"two applies", [][]projection.Facts{{ask(1, "e1"), ack(2, "e1")}, {ack(3, "e1"), ask(4, "e1")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := open(t, filepath.Join(t.TempDir(), "p.db"))
			for _, fs := range tc.applies {
				if err := db.Apply(ctx, fs); err != nil {
					t.Fatal(err)
				}
			}
			rows, err := db.Dump(ctx)
			if err != nil {
				t.Fatal(err)
			}
			count := func(prefix string) int {
				n := 0
				for _, r := range rows {
					if strings.HasPrefix(r, prefix) {
						n++
					}
				}
				return n
			}
			if m, o, od := count("mark|"), count("owe|"), count("owed|"); m != 1 || o != 1 || od != 1 {
				t.Errorf("%d marks, %d owe rows, %d owed rows; want one each:\n%q", m, o, od, rows)
			}
			actors, err := db.Actors(ctx)
			if want := []projection.Actor{{ID: "carol", Addressed: 2, Owes: 1, LastTS: "t4"}}; err != nil || !slices.Equal(actors, want) {
				t.Errorf("Actors = %+v, %v; want %+v", actors, err, want)
			}
		})
	}
}
