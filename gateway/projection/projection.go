// Package projection stores the relay's projections of the ledger
// (docs/scaling.md "Projections"): per group and thread, who takes part
// since which event; per event, who acked, answered, discharged or
// claimed it; per actor, counts and the last event. They
// are what a delivery needs to know of the history before and after an
// event (C2A thread participation, CCCS §6 acks), kept as facts are
// appended so that a page of deliveries costs O(page), not O(history).
//
// A DB is a cache: a SQLite file (or memory) beside the ledger, with a
// high-water mark (the ledger's log position, ledger.Store.Log, and the
// id of the event there) up to which it has applied the ledger. The
// ledger stays the truth; the package does not read it, decide
// attention or interpret events: the gateway turns events into Facts
// (gateway.Relay.SyncProjection) and rebuilds a DB from scratch with
// Reset when it is absent, behind another ledger, or of an older schema.
package projection

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/crosstalk-go/crosstalk/internal/privfile"
	"github.com/crosstalk-go/crosstalk/internal/sqliterr"
)

// ErrDamaged is wrapped by Open's error when the file is not a SQLite
// database or SQLite finds it malformed (a machine crash, a disk error, a
// file copied over it). The DB is a cache of the ledger: the caller may
// remove the file (Remove) and open it again, to be rebuilt.
var ErrDamaged = errors.New("the projections file is damaged (deleting it is safe: it is rebuilt from the ledger)")

// Schema is the version of the tables; a DB of another version is reset
// on Open, to be rebuilt from the ledger.
const Schema = 6

// JoinKind says how an actor joined a thread.
type JoinKind int

// The ways to join a thread (C2A "thread participation"): writing in it,
// or being a recipient named by an event of it.
const (
	JoinAuthor JoinKind = 1
	JoinNamed  JoinKind = 2
)

// Join is a token (an author or a recipient as recorded) that takes part
// in a thread of a group from the event Seq on, exclusive: events after
// Seq see it as a participant.
type Join struct {
	Thread string
	Kind   JoinKind
	Token  string
	Seq    int64
}

// MarkKind is what an event did to an earlier one.
type MarkKind int

// Marks an event leaves on another event of its group.
const (
	// MarkAck: Actor acked the event (chat.ack, system.notify_ack).
	MarkAck MarkKind = 1
	// MarkResponded: Actor replied to it or recorded a disposition.
	MarkResponded MarkKind = 2
	// MarkDischarged: its obligation was discharged (Actor is "").
	MarkDischarged MarkKind = 3
	// MarkClaimed: it was claimed at least once (Actor is "").
	MarkClaimed MarkKind = 4
)

// Mark is one mark on an event.
type Mark struct {
	Event string
	Kind  MarkKind
	Actor string
}

// ActorFact is what one event says of one actor.
type ActorFact struct {
	// ID is the actor as the gateway names it; actors are matched
	// without regard to case.
	ID string
	// Wrote: the actor wrote the event; Addressed: the event names it
	// as a recipient.
	Wrote, Addressed bool
	// Owes: the event is a message the actor must respond to; Msg is its
	// envelope message id (a reply names it), "" when none.
	Owes bool
	Msg  string
	// Settles are the event or message ids of messages the actor owed
	// that the event answers (an ack, a disposition, a reply).
	Settles []string
}

// Owe is a recipient that may owe an event: a token (an actor id in
// lower case, or a role or group selector such as "@reviewer", "@all")
// named by a message with a must-respond intent or an obligation.
type Owe struct {
	Token      string
	Obligation bool
	// Ack: the obligation is settled for its addressee by its ack
	// (a HANDOFF or BLOCKED).
	Ack bool
}

// Settle closes what Token owes of Event unless it is an obligation (an
// ack, a reply, a disposition by Token); an Ack also closes an
// obligation its ack settles.
type Settle struct {
	Event, Token string
	Ack          bool
}

// Answer is an event that answers an obligation: a reply (Reply), an
// ack (Ack), a reaction or a disposition, by Actor.
type Answer struct {
	Event, Actor string
	Reply, Ack   bool
}

// Facts is what the projections keep of one ledger event.
type Facts struct {
	// Pos is the event's ledger log position; Facts are applied in
	// position order.
	Pos     int64
	Group   string
	Seq     int64
	EventID string
	TS      string
	Joins   []Join
	Marks   []Mark
	Actors  []ActorFact
	// Owes are the recipients that may owe this event; Waits the actors
	// (lower case) that wait on its obligation: its author and delegate;
	// WaitAuthor is the author as recorded, WaitHandoff says a
	// HANDOFF (closed by an ack of anyone but its author).
	Owes        []Owe
	Waits       []string
	WaitAuthor  string
	WaitHandoff bool
	// Settles close owed items; Discharges is the event whose
	// obligation this one discharges, by DischargedBy; Resolves the
	// BLOCKED its addressee ResolvedBy resolved.
	Settles                  []Settle
	Discharges, DischargedBy string
	Resolves, ResolvedBy     string
	// Rung says the obligation RungOf returned or escalated for the
	// Rung-th time, to EscalatedTo ("" for a return): a rung event of
	// the relay's returns (docs/agents.md "Returns and escalation").
	RungOf, EscalatedTo string
	Rung                int
	// Answers are what this event answers, kept for the open
	// obligations among them.
	Answers []Answer
}

// OweRow is an item a token may owe.
type OweRow struct {
	Event, Group string
	Pos          int64
}

// WaitRow is an obligation an actor waits on.
type WaitRow struct {
	Event, Group             string
	Pos                      int64
	DischargedBy, ResolvedBy string
	// Rung is the last rung of its returns and escalation, EscalatedTo
	// where that rung went ("" for a return).
	Rung        int
	EscalatedTo string
}

// Actor is an actor's projection.
type Actor struct {
	ID        string
	Events    int64
	Addressed int64
	Owes      int64
	LastTS    string
}

// DB is a projection database. It is safe for concurrent use; writes
// are serialised.
type DB struct {
	db *sql.DB
	mu sync.Mutex // serialises Apply and Reset
	// stmts are Apply's statements, prepared once on the DB's one
	// connection; an Apply binds those it uses to its transaction
	// (sql.Tx.StmtContext reuses the connection's prepared statement).
	// multi are its multi-row inserts, one per kind of row and chunk.
	stmts [nStmts]*sql.Stmt
	multi [nMulti][len(chunks)]*sql.Stmt
	// ap is the applier every Apply reuses (under mu): its maps and
	// slices keep their room from one Apply to the next.
	ap applier
}

const schema = `
CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v ANY) WITHOUT ROWID;
-- Thread first: threads are ULIDs, so new threads insert at one end
-- of the table, whatever the number of groups.
CREATE TABLE IF NOT EXISTS joins(thread TEXT, grp TEXT, v BLOB, PRIMARY KEY(thread, grp)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS marks(grp TEXT, event TEXT, kind INTEGER, actor TEXT,
	PRIMARY KEY(grp, event, kind, actor)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS actors(key TEXT PRIMARY KEY, id TEXT, events INTEGER, addressed INTEGER,
	owes INTEGER, last_ts TEXT) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS owed(actor TEXT, event TEXT, msg TEXT, PRIMARY KEY(actor, event)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS owed_msg ON owed(actor, msg) WHERE msg != '';
CREATE TABLE IF NOT EXISTS owe(token TEXT, open INTEGER, event TEXT, grp TEXT, pos INTEGER, obligation INTEGER, ackable INTEGER,
	PRIMARY KEY(token, open, event)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS owe_event ON owe(event) WHERE obligation = 1;
CREATE TABLE IF NOT EXISTS owe_tokens(token TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS waits(actor TEXT, event TEXT, grp TEXT, pos INTEGER, author TEXT, handoff INTEGER,
	open INTEGER, discharged_by TEXT, resolved_by TEXT, rung INTEGER, escalated_to TEXT, PRIMARY KEY(actor, event)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS waits_open ON waits(actor, event) WHERE open = 1;
CREATE INDEX IF NOT EXISTS waits_event ON waits(event);
CREATE TABLE IF NOT EXISTS evidence(event TEXT, actor TEXT, reply INTEGER, ack INTEGER, seq INTEGER,
	PRIMARY KEY(event, actor, reply, ack)) WITHOUT ROWID;
`

// Open opens (creating it if needed) the projection DB in the file path,
// or in memory when path is "". A DB of another Schema is emptied: its
// high-water mark is then 0. A file it creates has mode 0600.
func Open(ctx context.Context, path string) (*DB, error) {
	var dsn string
	if path == "" {
		dsn = "file::memory:"
	} else {
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, fmt.Errorf("projection: open %q: %w", path, err)
		}
		// 0600 when new, -wal and -shm alike: the projections hold who wrote to whom.
		if err := privfile.Create(abs); err != nil {
			return nil, fmt.Errorf("projection: open %q: %w", path, err)
		}
		// synchronous(NORMAL): in WAL mode a commit does not fsync
		// (only checkpoints do), so OFF would save no CPU on the write
		// path, and a machine crash under OFF may leave a corrupt file
		// that Open rejects (ErrDamaged; the relay then removes it and
		// rebuilds it from the ledger, which takes a while on a large one).
		u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs),
			RawQuery: "_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"}
		dsn = u.String()
	}
	if err := register(); err != nil {
		return nil, fmt.Errorf("projection: open %q: %w", path, err)
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("projection: open %q: %w", path, err)
	}
	// One connection: an in-memory DB lives in it, and a cache needs no
	// concurrent readers (its reads are pages).
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	p := &DB{db: db}
	if err := p.migrate(ctx); err != nil {
		db.Close()
		if sqliterr.Damaged(err) {
			return nil, fmt.Errorf("projection: open %q: %w: %w", path, ErrDamaged, err)
		}
		return nil, fmt.Errorf("projection: open %q: %w", path, err)
	}
	for i, q := range stmtText {
		if p.stmts[i], err = db.PrepareContext(ctx, q); err != nil {
			p.Close()
			return nil, fmt.Errorf("projection: open %q: preparing: %w", path, err)
		}
	}
	for m, t := range multiText {
		for c, n := range chunks {
			q := t.head + t.row + strings.Repeat(", "+t.row, n-1) + t.tail
			if p.multi[m][c], err = db.PrepareContext(ctx, q); err != nil {
				p.Close()
				return nil, fmt.Errorf("projection: open %q: preparing: %w", path, err)
			}
		}
	}
	return p, nil
}

// Remove removes the projection file path with its -wal and -shm files,
// so that Open starts it again empty (to be rebuilt from the ledger). A
// file that is not there is no error.
func Remove(path string) error {
	var errs []error
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("projection: remove %q: %w", path, err)
	}
	return nil
}

func (p *DB) migrate(ctx context.Context) error {
	var v int
	err := p.db.QueryRowContext(ctx, `SELECT v FROM meta WHERE k = 'schema'`).Scan(&v)
	if err == nil && v != Schema {
		// Tables of another version may differ in shape: start over
		// ("groups" was schema 5's and before).
		for _, t := range []string{"meta", "joins", "marks", "groups", "actors", "owed", "owe", "owe_tokens", "waits", "evidence"} {
			if _, err := p.db.ExecContext(ctx, "DROP TABLE IF EXISTS "+t); err != nil {
				return err
			}
		}
	}
	if _, err := p.db.ExecContext(ctx, schema); err != nil {
		return err
	}
	err = p.db.QueryRowContext(ctx, `SELECT v FROM meta WHERE k = 'schema'`).Scan(&v)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return err
	case v == Schema:
		return nil
	}
	return p.Reset(ctx)
}

// Close closes the DB.
func (p *DB) Close() error {
	for _, st := range p.stmts {
		if st != nil {
			st.Close()
		}
	}
	for _, sts := range p.multi {
		for _, st := range sts {
			if st != nil {
				st.Close()
			}
		}
	}
	return p.db.Close()
}

// Reset empties every projection and sets the high-water mark to 0. Its
// error wraps ErrDamaged when SQLite finds the file malformed on the way.
func (p *DB) Reset(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	tx, err := p.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("projection: reset: %w", err)
	}
	defer tx.Rollback()
	for _, t := range []string{"meta", "joins", "marks", "actors", "owed", "owe", "owe_tokens", "waits", "evidence"} {
		if _, err := tx.ExecContext(ctx, "DELETE FROM "+t); err != nil {
			if sqliterr.Damaged(err) {
				return fmt.Errorf("projection: reset %s: %w: %w", t, ErrDamaged, err)
			}
			return fmt.Errorf("projection: reset %s: %w", t, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO meta(k, v) VALUES('schema', ?), ('pos', 0), ('event', '')`, Schema); err != nil {
		return fmt.Errorf("projection: reset: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("projection: reset: %w", err)
	}
	return nil
}

// HighWater returns the log position up to which the DB has applied the
// ledger, and the id of the event there ("" at 0).
func (p *DB) HighWater(ctx context.Context) (pos int64, event string, err error) {
	rows, err := p.db.QueryContext(ctx, `SELECT k, v FROM meta WHERE k IN ('pos', 'event')`)
	if err != nil {
		return 0, "", fmt.Errorf("projection: high-water mark: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		var v any
		if err := rows.Scan(&k, &v); err != nil {
			return 0, "", fmt.Errorf("projection: high-water mark: %w", err)
		}
		switch v := v.(type) {
		case int64:
			pos = v
		case string:
			event = v
		}
	}
	return pos, event, rows.Err()
}

// Apply applies facts, in position order and all after the high-water
// mark, in one transaction that also moves the mark to the last one.
// Facts at or before the mark are skipped, so applying twice is
// harmless.
func (p *DB) Apply(ctx context.Context, facts []Facts) error {
	if len(facts) == 0 {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	tx, err := p.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("projection: apply: %w", err)
	}
	defer tx.Rollback()
	a := &p.ap
	a.start(p, tx)
	defer a.finish()
	var hwm int64
	if err := a.stmt(ctx, stHighWater).QueryRowContext(ctx).Scan(&hwm); err != nil {
		return fmt.Errorf("projection: apply: %w", err)
	}
	var last *Facts
	for i := range facts {
		f := &facts[i]
		if f.Pos <= hwm {
			continue
		}
		if err := a.apply(ctx, f); err != nil {
			return fmt.Errorf("projection: apply event %s: %w", f.EventID, err)
		}
		last, hwm = f, f.Pos
	}
	if last == nil {
		return nil // all applied before: the mark stays
	}
	if err := a.flush(ctx); err != nil {
		return fmt.Errorf("projection: apply: %w", err)
	}
	if _, err := a.exec(ctx, stSetHighWater, last.Pos, last.EventID); err != nil {
		return fmt.Errorf("projection: apply: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("projection: apply: %w", err)
	}
	return nil
}

// Apply's statements, by index into stmtText and DB.stmts.
const (
	stHighWater = iota
	stSetHighWater
	stActor
	stSettle
	stSettleMsg
	stOweToken
	stOweSettle
	stOweDischarge
	stWait
	stWaitRung
	stWaitDo
	stWaitResolve
	stWaitHandoff
	stEvidence
	nStmts
)

var stmtText = [nStmts]string{
	stHighWater:    `SELECT v FROM meta WHERE k = 'pos'`,
	stSetHighWater: `UPDATE meta SET v = CASE k WHEN 'pos' THEN ? ELSE ? END WHERE k IN ('pos', 'event')`,
	stActor: `INSERT INTO actors(key, id, events, addressed, owes, last_ts) VALUES(?1, ?2, ?3, ?4, ?5, ?6)
			ON CONFLICT(key) DO UPDATE SET events = events + ?3, addressed = addressed + ?4, owes = owes + ?5, last_ts = ?6`,
	// Two statements, each a search of an index: with an OR, SQLite
	// scanned all the actor's open items for every settlement, and
	// with event IN (a union) it materialised the rows read first.
	stSettle:       `DELETE FROM owed WHERE actor = ?1 AND event = ?2`,
	stSettleMsg:    `DELETE FROM owed WHERE actor = ?1 AND msg = ?2 AND msg != ''`,
	stOweToken:     `INSERT INTO owe_tokens(token) VALUES(?) ON CONFLICT DO NOTHING`,
	stOweSettle:    `UPDATE owe SET open = 0 WHERE token = ?1 AND open = 1 AND event = ?2 AND (obligation = 0 OR (?3 AND ackable = 1))`,
	stOweDischarge: `UPDATE owe SET open = 0 WHERE event = ? AND obligation = 1 AND open = 1`,
	stWait: `INSERT INTO waits(actor, event, grp, pos, author, handoff, open, discharged_by, resolved_by, rung, escalated_to)
			VALUES(?, ?, ?, ?, ?, ?, 1, '', '', 0, '') ON CONFLICT DO NOTHING`,
	stWaitRung:    `UPDATE waits SET rung = ?1, escalated_to = ?2 WHERE event = ?3 AND open = 1 AND rung < ?1`,
	stWaitDo:      `UPDATE waits SET open = 0, discharged_by = ?1 WHERE event = ?2 AND open = 1`,
	stWaitResolve: `UPDATE waits SET open = 0, resolved_by = ?1 WHERE event = ?2 AND open = 1`,
	stWaitHandoff: `UPDATE waits SET open = 0 WHERE event = ?1 AND open = 1 AND handoff = 1 AND lower(author) != lower(?2)`,
	// It changes a row (inserts one, or keeps the first seq of one)
	// exactly when the obligation is open: an ack that changes none
	// has no handoff to close.
	stEvidence: `INSERT INTO evidence(event, actor, reply, ack, seq) SELECT ?1, ?2, ?3, ?4, ?5
			WHERE EXISTS (SELECT 1 FROM waits WHERE event = ?1 AND open = 1) ON CONFLICT DO UPDATE SET seq = seq`,
}

// The kinds of rows an Apply gathers and inserts at its end, many a
// statement (multiText, DB.multi): the joins, marks, owe items and
// owed items of its events. Nothing the Apply runs reads joins or
// marks; a settlement or discharge applies to the owe and owed items
// gathered (applier.settleOwe, settleOwed, dischargeOwe) as its
// statement does to those inserted, so each event sees what it would
// have seen had every row gone in at once.
const (
	mJoin = iota
	mMark
	mOwe
	mOweOpen
	mOwed
	nMulti
)

// chunks are the row counts of the prepared multi-row inserts, largest
// first: n rows take one statement per bit of n below 64.
var chunks = [...]int{64, 32, 16, 8, 4, 2, 1}

// multiText are the multi-row inserts: head, then row once per row,
// then tail. Every parameter bound costs the driver a call or two into
// SQLite (a text or blob also a copy into C memory, freed after the
// step), so rows bind only what varies: values every row of a kind has
// are in the text, and the first shared parameters (?1 ...) are bound
// once for all the rows of a statement; per is the parameters of each
// row.
var multiText = [nMulti]struct {
	head, row, tail string
	shared, per     int
}{
	// A thread met before gets the joins it lacks (joinsAdd): most
	// events start their thread, and the function runs only for the
	// others.
	mJoin: {`INSERT INTO joins(thread, grp, v) VALUES `, `(?, ?, ?)`,
		` ON CONFLICT DO UPDATE SET v = ` + joinsAddFunc + `(v, excluded.v) WHERE ` + joinsAddFunc + `(v, excluded.v) IS NOT NULL`, 0, 3},
	// OR IGNORE rather than ON CONFLICT DO NOTHING: the same rows go in
	// (the values are never NULL, and the tables have no CHECK), but
	// with no constraint left that could abort the statement, SQLite
	// runs these multi-row inserts without a statement journal, which
	// copied every page the owed rows (two b-trees) touched.
	mMark: {`INSERT OR IGNORE INTO marks(grp, event, kind, actor) VALUES `, `(?, ?, ?, ?)`, ``, 0, 4},
	mOwe:  {`INSERT OR IGNORE INTO owe(token, open, event, grp, pos, obligation, ackable) VALUES `, `(?, ?, ?, ?, ?, ?, ?)`, ``, 0, 7},
	// The owe items of most events: open, of no obligation.
	mOweOpen: {`INSERT OR IGNORE INTO owe(token, open, event, grp, pos, obligation, ackable) VALUES `, `(?, 1, ?, ?, ?, 0, 0)`, ``, 0, 4},
	// One actor's (insertOwed inserts them by actor): ?1.
	mOwed: {`INSERT OR IGNORE INTO owed(actor, event, msg) VALUES `, `(?1, ?, ?)`, ``, 1, 2},
}

// applier is one Apply: its transaction, the statements it used so far
// bound to it, the rows it has yet to insert, and the actor counters of
// the facts applied so far, written once per Apply (flush): a row per
// actor touched instead of one per event.
type applier struct {
	tx     *sql.Tx
	db     *DB
	bound  [nStmts]*sql.Stmt
	multi  [nMulti][len(chunks)]*sql.Stmt // bound as they are used
	actors map[string]*actorDelta
	// The rows gathered: the threads' joins, merged (joins, a row per
	// thread and group in the order met, jrow its index by thread and
	// group), the marks (mMark's arguments, row after row), the owe and
	// owed items.
	joins []joinRow
	jrow  map[[2]string]int
	marks []any
	owe   []oweItem
	owed  []owedItem
	args  []any // scratch for insert's arguments
	chunk []any // scratch for a statement's arguments (insert)
}

// joinRow is a thread's joins an Apply has yet to write.
type joinRow struct {
	thread, grp string
	set         joinSet
	// keys are set's (kind, token) once set is long (joinKeysAt): a
	// short set is searched instead, without a map per thread.
	keys map[joinKey]bool
}

// joinKeysAt is the length of a joinSet from which a search of it
// costs more than a map of its keys.
const joinKeysAt = 256

// applierKeep bounds the rows an applier keeps room for between two
// Applies (a rebuild's Apply gathers thousands).
const applierKeep = 1024

// oweItem is a row of owe an Apply has yet to insert.
type oweItem struct {
	token, event, grp       string
	pos                     int64
	obligation, ack, closed bool
}

// owedItem is a row of owed an Apply has yet to insert.
type owedItem struct{ actor, event, msg string }

// actorDelta is what an Apply adds to an actor's row.
type actorDelta struct {
	id                      string
	events, addressed, owes int64
	lastTS                  string
}

// start readies a for an Apply in tx.
func (a *applier) start(p *DB, tx *sql.Tx) {
	a.tx, a.db = tx, p
	if a.actors == nil {
		a.actors, a.jrow = map[string]*actorDelta{}, map[[2]string]int{}
	}
}

// finish empties a after an Apply, keeping the room of its slices and
// maps unless an Apply of a rebuild made them large.
func (a *applier) finish() {
	a.tx = nil
	a.bound, a.multi = [nStmts]*sql.Stmt{}, [nMulti][len(chunks)]*sql.Stmt{} // the transaction's: closed with it
	// clear keeps a map's room, and costs as much as that room next time.
	bigMaps := len(a.jrow) > applierKeep || len(a.actors) > applierKeep
	clear(a.actors)
	clear(a.jrow)
	for i := range a.joins {
		set := a.joins[i].set[:0] // keeps the set's room, unless a wide event's
		if cap(set) > 4*joinKeysAt {
			set = nil
		}
		a.joins[i] = joinRow{set: set}
	}
	clear(a.marks)
	clear(a.owe)
	clear(a.owed)
	a.joins, a.marks, a.owe, a.owed = a.joins[:0], a.marks[:0], a.owe[:0], a.owed[:0]
	if cap(a.joins) > applierKeep || cap(a.marks) > 4*applierKeep || cap(a.args) > 4*applierKeep {
		a.joins, a.marks, a.args = nil, nil, nil
	}
	if bigMaps {
		a.actors, a.jrow = nil, nil
	}
}

// stmt returns statement i bound to the Apply's transaction.
func (a *applier) stmt(ctx context.Context, i int) *sql.Stmt {
	st := a.bound[i]
	if st == nil {
		st = a.tx.StmtContext(ctx, a.db.stmts[i])
		a.bound[i] = st
	}
	return st
}

// exec runs statement i in the Apply's transaction.
func (a *applier) exec(ctx context.Context, i int, args ...any) (sql.Result, error) {
	return a.stmt(ctx, i).ExecContext(ctx, args...)
}

// insert inserts rows of kind m, args their shared arguments then each
// row's one row after another, in chunks, and returns how many it
// inserted or updated.
func (a *applier) insert(ctx context.Context, m int, args []any) (int64, error) {
	t := multiText[m]
	shared, rows := args[:t.shared], args[t.shared:]
	var total int64
	for len(rows) > 0 {
		c := 0
		for chunks[c]*t.per > len(rows) {
			c++
		}
		st := a.multi[m][c]
		if st == nil {
			st = a.tx.StmtContext(ctx, a.db.multi[m][c])
			a.multi[m][c] = st
		}
		n := chunks[c] * t.per
		bound := rows[:n]
		if len(shared) > 0 {
			a.chunk = append(append(a.chunk[:0], shared...), bound...)
			bound = a.chunk
		}
		res, err := st.ExecContext(ctx, bound...)
		clear(a.chunk)
		if err != nil {
			return 0, err
		}
		affected, _ := res.RowsAffected()
		total += affected
		rows = rows[n:]
	}
	return total, nil
}

func (a *applier) apply(ctx context.Context, f *Facts) error {
	r := -1 // the row of the last join's thread: an event's joins share one
	for _, j := range f.Joins {
		if r < 0 || a.joins[r].thread != j.Thread {
			r = a.joinRow(j.Thread, f.Group)
		}
		a.joins[r].add(j.Kind, j.Token, f.Seq)
	}
	for _, m := range f.Marks {
		a.marks = append(a.marks, f.Group, m.Event, int(m.Kind), m.Actor)
	}
	if err := a.applyOpenSets(ctx, f); err != nil {
		return err
	}
	for _, af := range f.Actors {
		key := strings.ToLower(af.ID)
		d, ok := a.actors[key]
		if !ok {
			d = &actorDelta{id: af.ID}
			a.actors[key] = d
		}
		d.events += b2i(af.Wrote)
		d.addressed += b2i(af.Addressed)
		d.lastTS = f.TS
		for _, id := range af.Settles {
			if id == "" {
				continue
			}
			a.settleOwed(key, id)
			for _, st := range []int{stSettle, stSettleMsg} {
				res, err := a.exec(ctx, st, key, id)
				if err != nil {
					return err
				}
				n, _ := res.RowsAffected()
				d.owes -= n
			}
		}
		if af.Owes && !gathered(a.owed, func(o owedItem) bool { return o.event == f.EventID }, func(o owedItem) bool { return o.actor == key }) {
			a.owed = append(a.owed, owedItem{key, f.EventID, af.Msg})
		}
	}
	if len(a.owed) >= maxGathered {
		return a.insertOwed(ctx)
	}
	return nil
}

// joinRow returns the index in a.joins of the row of thread in group,
// adding it when the Apply has not met the thread.
func (a *applier) joinRow(thread, group string) int {
	key := [2]string{thread, group}
	r, ok := a.jrow[key]
	if !ok {
		r = len(a.joins)
		a.jrow[key] = r
		if r < cap(a.joins) {
			a.joins = a.joins[:r+1] // its set's room, from an earlier Apply
			a.joins[r].thread, a.joins[r].grp = thread, group
		} else {
			a.joins = append(a.joins, joinRow{thread: thread, grp: group})
		}
	}
	return r
}

// add adds the join (kind, token) from seq unless the row holds it.
func (r *joinRow) add(kind JoinKind, token string, seq int64) {
	k := joinKey{kind, token}
	switch {
	case r.keys != nil:
		if r.keys[k] {
			return
		}
		r.keys[k] = true
	case r.set.has(kind, token):
		return
	case len(r.set) >= joinKeysAt:
		r.keys = r.set.keys()
		r.keys[k] = true
	}
	r.set = r.set.put(kind, token, seq)
}

// gathered reports whether an item of the event being applied (those
// of, at the end of items) is same.
func gathered[T any](items []T, of, same func(T) bool) bool {
	for i := len(items) - 1; i >= 0 && of(items[i]); i-- {
		if same(items[i]) {
			return true
		}
	}
	return false
}

// settleOwed drops the owed items gathered that stSettle and
// stSettleMsg delete: the actor's with the event or message id id.
// They were never counted.
func (a *applier) settleOwed(actor, id string) {
	a.owed = slices.DeleteFunc(a.owed, func(o owedItem) bool {
		return o.actor == actor && (o.event == id || o.msg == id && o.msg != "")
	})
}

// settleOwe closes the owe items gathered that stOweSettle closes.
func (a *applier) settleOwe(st Settle) {
	for i := range a.owe {
		o := &a.owe[i]
		if o.token == st.Token && o.event == st.Event && (!o.obligation || st.Ack && o.ack) {
			o.closed = true
		}
	}
}

// dischargeOwe closes the owe items gathered that stOweDischarge
// closes.
func (a *applier) dischargeOwe(event string) {
	for i := range a.owe {
		if o := &a.owe[i]; o.event == event && o.obligation {
			o.closed = true
		}
	}
}

// flush inserts the rows gathered and writes the group and actor
// counters of the facts applied.
func (a *applier) flush(ctx context.Context) error {
	if err := a.insertJoins(ctx); err != nil {
		return err
	}
	if _, err := a.insert(ctx, mMark, a.marks); err != nil {
		return err
	}
	if err := a.insertOwe(ctx); err != nil {
		return err
	}
	if err := a.insertOwed(ctx); err != nil {
		return err
	}
	for key, d := range a.actors {
		if _, err := a.exec(ctx, stActor, key, d.id, d.events, d.addressed, d.owes, d.lastTS); err != nil {
			return err
		}
	}
	return nil
}

// maxGathered bounds the owe and owed items an Apply gathers before it
// inserts them: settlements look through those gathered.
const maxGathered = 256

// insertOwe inserts the owe items gathered: first the open ones of no
// obligation (mOweOpen), then the others. Their keys differ (an item
// of the same key is gathered once), so the order changes no row.
func (a *applier) insertOwe(ctx context.Context) error {
	for _, m := range []int{mOweOpen, mOwe} {
		args := a.args[:0]
		for _, o := range a.owe {
			switch plain := !o.closed && !o.obligation && !o.ack; {
			case plain && m == mOweOpen:
				args = append(args, o.token, o.event, o.grp, o.pos)
			case !plain && m == mOwe:
				args = append(args, o.token, b2i(!o.closed), o.event, o.grp, o.pos, b2i(o.obligation), b2i(o.ack))
			}
		}
		_, err := a.insert(ctx, m, args)
		clear(args)
		a.args = args[:0]
		if err != nil {
			return err
		}
	}
	a.owe = a.owe[:0]
	return nil
}

// insertOwed inserts the owed items gathered, by actor, and counts
// what each owes more by the rows inserted.
func (a *applier) insertOwed(ctx context.Context) error {
	slices.SortStableFunc(a.owed, func(x, y owedItem) int { return strings.Compare(x.actor, y.actor) })
	for rest := a.owed; len(rest) > 0; {
		n := 1
		for n < len(rest) && rest[n].actor == rest[0].actor {
			n++
		}
		args := append(a.args[:0], rest[0].actor)
		for _, o := range rest[:n] {
			args = append(args, o.event, o.msg)
		}
		added, err := a.insert(ctx, mOwed, args)
		clear(args)
		a.args = args[:0]
		if err != nil {
			return err
		}
		a.actors[rest[0].actor].owes += added
		rest = rest[n:]
	}
	a.owed = a.owed[:0]
	return nil
}

// insertJoins writes the threads' joins gathered, a row per thread:
// inserted when new, given the joins it lacks when not (mJoin).
func (a *applier) insertJoins(ctx context.Context) error {
	args := a.args[:0]
	for i := range a.joins {
		r := &a.joins[i]
		args = append(args, r.thread, r.grp, []byte(r.set))
	}
	_, err := a.insert(ctx, mJoin, args)
	clear(args)
	a.args = args[:0]
	return err
}

// joinsAddFunc is the SQL name of joinsAdd. The driver offers it on
// every connection it opens once registered, in the whole process: the
// name is prefixed to be the package's own.
const joinsAddFunc = "crosstalk_projection_joins_add"

var (
	registerOnce sync.Once
	registerErr  error
)

// register registers joinsAdd with the SQLite driver, once; Open calls
// it before it opens a connection.
func register() error {
	registerOnce.Do(func() {
		registerErr = sqlite.RegisterDeterministicScalarFunction(joinsAddFunc, 2, joinsAdd)
	})
	return registerErr
}

// joinsAdd(v, add) is the joinSet v with the joins of the joinSet add
// that it lacks, or NULL when it lacks none.
func joinsAdd(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
	old, _ := args[0].([]byte)
	add, _ := args[1].([]byte)
	n := joinSet(old).readable()
	merged := joinSet(slices.Clip(old[:n])) // an unreadable tail is dropped
	var keys map[joinKey]bool
	if len(add) > 256 {
		keys = merged.keys()
	}
	for j := range joinSet(add).all {
		k := joinKey{j.Kind, j.Token}
		if keys != nil {
			if keys[k] {
				continue
			}
			keys[k] = true
		} else if merged.has(j.Kind, j.Token) {
			continue
		}
		merged = merged.put(j.Kind, j.Token, j.Seq)
	}
	if len(merged) == len(old) {
		return nil, nil
	}
	return []byte(merged), nil
}

// applyOpenSets applies what f says of owed items and awaited
// obligations. Evidence goes first: an event answers others, never
// itself.
func (a *applier) applyOpenSets(ctx context.Context, f *Facts) error {
	for _, e := range f.Answers {
		res, err := a.exec(ctx, stEvidence, e.Event, e.Actor, b2i(e.Reply), b2i(e.Ack), f.Seq)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); e.Ack && n > 0 {
			if _, err := a.exec(ctx, stWaitHandoff, e.Event, e.Actor); err != nil {
				return err
			}
		}
	}
	for _, o := range f.Owes {
		if !gathered(a.owe, func(x oweItem) bool { return x.event == f.EventID }, func(x oweItem) bool { return x.token == o.Token }) {
			a.owe = append(a.owe, oweItem{token: o.Token, event: f.EventID, grp: f.Group, pos: f.Pos, obligation: o.Obligation, ack: o.Ack})
		}
		if strings.HasPrefix(o.Token, "@") {
			if _, err := a.exec(ctx, stOweToken, o.Token); err != nil {
				return err
			}
		}
	}
	if len(a.owe) >= maxGathered {
		if err := a.insertOwe(ctx); err != nil {
			return err
		}
	}
	for _, w := range f.Waits {
		if _, err := a.exec(ctx, stWait, w, f.EventID, f.Group, f.Pos, f.WaitAuthor, b2i(f.WaitHandoff)); err != nil {
			return err
		}
	}
	for _, st := range f.Settles {
		a.settleOwe(st)
		if _, err := a.exec(ctx, stOweSettle, st.Token, st.Event, b2i(st.Ack)); err != nil {
			return err
		}
	}
	if f.Discharges != "" {
		a.dischargeOwe(f.Discharges)
		if _, err := a.exec(ctx, stOweDischarge, f.Discharges); err != nil {
			return err
		}
		if _, err := a.exec(ctx, stWaitDo, f.DischargedBy, f.Discharges); err != nil {
			return err
		}
	}
	if f.Resolves != "" {
		if _, err := a.exec(ctx, stWaitResolve, f.ResolvedBy, f.Resolves); err != nil {
			return err
		}
	}
	if f.RungOf != "" {
		if _, err := a.exec(ctx, stWaitRung, f.Rung, f.EscalatedTo, f.RungOf); err != nil {
			return err
		}
	}
	return nil
}

// b2i is b as SQL stores it. An int64 (not an int) goes to the driver
// as it is, without database/sql converting it.
func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// Joins returns the joins of the thread of group, in no order.
func (p *DB) Joins(ctx context.Context, group, thread string) ([]Join, error) {
	var v []byte
	err := p.db.QueryRowContext(ctx, `SELECT v FROM joins WHERE grp = ? AND thread = ?`, group, thread).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("projection: joins of %q: %w", thread, err)
	}
	var out []Join
	for j := range joinSet(v).all {
		j.Thread = thread
		out = append(out, j)
	}
	return out, nil
}

// maxParams bounds the ids of one Marks query (SQLite's default limit of
// bound parameters is 32766; pages are far smaller).
const maxParams = 500

// Marks returns the marks on the events of group, in no order.
func (p *DB) Marks(ctx context.Context, group string, events []string) ([]Mark, error) {
	var out []Mark
	for len(events) > 0 {
		n := min(len(events), maxParams)
		args := make([]any, 0, n+1)
		args = append(args, group)
		for _, id := range events[:n] {
			args = append(args, id)
		}
		q := `SELECT event, kind, actor FROM marks WHERE grp = ? AND event IN (?` + strings.Repeat(",?", n-1) + `)`
		rows, err := p.db.QueryContext(ctx, q, args...)
		if err != nil {
			return nil, fmt.Errorf("projection: marks of group %q: %w", group, err)
		}
		for rows.Next() {
			var m Mark
			if err := rows.Scan(&m.Event, &m.Kind, &m.Actor); err != nil {
				rows.Close()
				return nil, fmt.Errorf("projection: marks of group %q: %w", group, err)
			}
			out = append(out, m)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("projection: marks of group %q: %w", group, err)
		}
		events = events[n:]
	}
	return out, nil
}

// Actors returns every actor's projection, ordered by key (the id in
// lower case).
func (p *DB) Actors(ctx context.Context) ([]Actor, error) {
	rows, err := p.db.QueryContext(ctx, `SELECT id, events, addressed, owes, last_ts FROM actors ORDER BY key`)
	if err != nil {
		return nil, fmt.Errorf("projection: actors: %w", err)
	}
	defer rows.Close()
	var out []Actor
	for rows.Next() {
		var a Actor
		if err := rows.Scan(&a.ID, &a.Events, &a.Addressed, &a.Owes, &a.LastTS); err != nil {
			return nil, fmt.Errorf("projection: actors: %w", err)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// Dump writes every row of every projection, in key order, one line
// each: two DBs that applied the same ledger dump the same lines. It is
// what `crosstalk ledger reindex --check` and the tests compare.
func (p *DB) Dump(ctx context.Context) ([]string, error) {
	var out []string
	for _, q := range []string{
		`SELECT 'meta', k, v, '', '', '' FROM meta ORDER BY k`,
		joinsDump,
		`SELECT 'mark', grp, event, kind, actor, '' FROM marks ORDER BY grp, event, kind, actor`,
		`SELECT 'actor', key, id, events, addressed, owes || ' ' || last_ts FROM actors ORDER BY key`,
		`SELECT 'owed', actor, event, msg, '', '' FROM owed ORDER BY actor, event`,
		`SELECT 'owe', token, event, grp, pos, obligation || ' ' || ackable || ' ' || open FROM owe ORDER BY token, event`,
		`SELECT 'owe_token', token, '', '', '', '' FROM owe_tokens ORDER BY token`,
		`SELECT 'wait', actor, event, grp, pos, author || ' ' || handoff || ' ' || open || ' ' || discharged_by || ' ' || resolved_by || ' ' || rung || ' ' || escalated_to FROM waits ORDER BY actor, event`,
		`SELECT 'evidence', event, actor, reply, ack, seq FROM evidence ORDER BY event, actor, reply, ack`,
	} {
		rows, err := p.db.QueryContext(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("projection: dump: %w", err)
		}
		for rows.Next() {
			var c [6]any
			if err := rows.Scan(&c[0], &c[1], &c[2], &c[3], &c[4], &c[5]); err != nil {
				rows.Close()
				return nil, fmt.Errorf("projection: dump: %w", err)
			}
			if q == joinsDump {
				out = append(out, dumpJoins(c[1], c[2], c[3])...)
				continue
			}
			out = append(out, fmt.Sprintf("%v|%v|%v|%v|%v|%v", c[0], c[1], c[2], c[3], c[4], c[5]))
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("projection: dump: %w", err)
		}
	}
	return out, nil
}

// joinsDump is Dump's query of the joins table, a row per thread that
// dumpJoins makes a line per join.
const joinsDump = `SELECT 'join', grp, thread, v, '', '' FROM joins ORDER BY grp, thread`

// dumpJoins returns a Dump line per join of a thread's row, in (kind,
// token) order.
func dumpJoins(grp, thread, v any) []string {
	b, _ := v.([]byte)
	var joins []Join
	for j := range joinSet(b).all {
		joins = append(joins, j)
	}
	slices.SortFunc(joins, func(a, b Join) int { return cmp.Or(cmp.Compare(a.Kind, b.Kind), strings.Compare(a.Token, b.Token)) })
	out := make([]string, len(joins))
	for i, j := range joins {
		out[i] = fmt.Sprintf("join|%v|%v|%d|%s|%d", grp, thread, j.Kind, j.Token, j.Seq)
	}
	return out
}

// OweTokens returns the role and group selectors ("@reviewer", "@all")
// that some message may be owed by, for a reader to match against an
// agent's roles.
func (p *DB) OweTokens(ctx context.Context) ([]string, error) {
	rows, err := p.db.QueryContext(ctx, `SELECT token FROM owe_tokens ORDER BY token`)
	if err != nil {
		return nil, fmt.Errorf("projection: owe tokens: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			return nil, fmt.Errorf("projection: owe tokens: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// Owed returns the items any of tokens may owe with event ids after
// after, in event id order, at most limit of them (1 to 1000): only the
// open ones (not settled by Token's ack or reply, nor discharged) unless
// all. An item named by several tokens is listed once. Each token's read
// is a keyset range of the key (token, open, event), two with all (the
// open and the settled items, merged): O(limit × tokens).
func (p *DB) Owed(ctx context.Context, tokens []string, after string, all bool, limit int) ([]OweRow, error) {
	limit = min(max(limit, 1), 1000)
	// The key is (token, open, event): a range per token and state.
	open := []int{1}
	if all {
		open = []int{0, 1}
	}
	seen := map[string]bool{}
	var out []OweRow
	for _, t := range tokens {
		for _, o := range open {
			if err := p.owedRange(ctx, &out, seen, t, o, after, limit); err != nil {
				return nil, err
			}
		}
	}
	slices.SortFunc(out, func(a, b OweRow) int { return strings.Compare(a.Event, b.Event) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// owedRange appends to out the items of token in state open after
// after, at most limit, that are not in seen.
func (p *DB) owedRange(ctx context.Context, out *[]OweRow, seen map[string]bool, t string, open int, after string, limit int) error {
	rows, err := p.db.QueryContext(ctx, `SELECT event, grp, pos FROM owe WHERE token = ? AND open = ? AND event > ? ORDER BY event LIMIT ?`, t, open, after, limit)
	if err != nil {
		return fmt.Errorf("projection: owed by %q: %w", t, err)
	}
	defer rows.Close()
	for rows.Next() {
		var o OweRow
		if err := rows.Scan(&o.Event, &o.Group, &o.Pos); err != nil {
			return fmt.Errorf("projection: owed by %q: %w", t, err)
		}
		if !seen[o.Event] {
			seen[o.Event] = true
			*out = append(*out, o)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("projection: owed by %q: %w", t, err)
	}
	return nil
}

// Waits returns the obligations actor (lower case) authored or is the
// delegate of, with event ids after after, in event id order, at most
// limit of them (1 to 1000): only the open ones unless all.
func (p *DB) Waits(ctx context.Context, actor, after string, all bool, limit int) ([]WaitRow, error) {
	limit = min(max(limit, 1), 1000)
	q := `SELECT event, grp, pos, discharged_by, resolved_by, rung, escalated_to FROM waits INDEXED BY waits_open WHERE actor = ? AND open = 1 AND event > ? ORDER BY event LIMIT ?`
	if all {
		q = `SELECT event, grp, pos, discharged_by, resolved_by, rung, escalated_to FROM waits WHERE actor = ? AND event > ? ORDER BY event LIMIT ?`
	}
	rows, err := p.db.QueryContext(ctx, q, actor, after, limit)
	if err != nil {
		return nil, fmt.Errorf("projection: waits of %q: %w", actor, err)
	}
	defer rows.Close()
	var out []WaitRow
	for rows.Next() {
		var w WaitRow
		if err := rows.Scan(&w.Event, &w.Group, &w.Pos, &w.DischargedBy, &w.ResolvedBy, &w.Rung, &w.EscalatedTo); err != nil {
			return nil, fmt.Errorf("projection: waits of %q: %w", actor, err)
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

// Evidence returns what answered the obligation event while it was
// open, in the order it first did (per actor and way of answering).
func (p *DB) Evidence(ctx context.Context, event string) ([]Answer, error) {
	rows, err := p.db.QueryContext(ctx, `SELECT actor, reply, ack FROM evidence WHERE event = ? ORDER BY seq, actor, reply, ack`, event)
	if err != nil {
		return nil, fmt.Errorf("projection: evidence of %s: %w", event, err)
	}
	defer rows.Close()
	var out []Answer
	for rows.Next() {
		a := Answer{Event: event}
		if err := rows.Scan(&a.Actor, &a.Reply, &a.Ack); err != nil {
			return nil, fmt.Errorf("projection: evidence of %s: %w", event, err)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// joinSet is a thread's joins as the joins table keeps them, one row per
// thread: for each join in the order applied, its kind (a byte), its
// token (a uvarint length, then the bytes) and the seq from which it
// takes part (a varint). A (kind, token) appears once, with the seq of
// the first event that made it.
type joinSet []byte

type joinKey struct {
	kind  JoinKind
	token string
}

// next decodes the first join of s and returns the rest; ok is false at
// the end of s or at bytes it cannot read. token aliases s.
func (s joinSet) next() (kind JoinKind, token []byte, seq int64, rest joinSet, ok bool) {
	if len(s) == 0 {
		return 0, nil, 0, nil, false
	}
	n, k := binary.Uvarint(s[1:])
	if k <= 0 || n > uint64(len(s)-1-k) {
		return 0, nil, 0, nil, false
	}
	token = s[1+k : 1+k+int(n)]
	seq, k2 := binary.Varint(s[1+k+int(n):])
	if k2 <= 0 {
		return 0, nil, 0, nil, false
	}
	return JoinKind(s[0]), token, seq, s[1+k+int(n)+k2:], true
}

// readable returns the length of the prefix of s that all reads.
func (s joinSet) readable() int {
	rest := s
	for {
		_, _, _, r, ok := rest.next()
		if !ok {
			return len(s) - len(rest)
		}
		rest = r
	}
}

// keys returns the (kind, token) of s.
func (s joinSet) keys() map[joinKey]bool {
	out := map[joinKey]bool{}
	for j := range s.all {
		out[joinKey{j.Kind, j.Token}] = true
	}
	return out
}

// has reports whether s holds (kind, token), without allocating.
func (s joinSet) has(kind JoinKind, token string) bool {
	for rest := s; ; {
		k, t, _, r, ok := rest.next()
		if !ok {
			return false
		}
		if k == kind && string(t) == token {
			return true
		}
		rest = r
	}
}

// put appends the join (kind, token) from seq, which s lacks.
func (s joinSet) put(kind JoinKind, token string, seq int64) joinSet {
	s = append(s, byte(kind))
	s = binary.AppendUvarint(s, uint64(len(token)))
	s = append(s, token...)
	return binary.AppendVarint(s, seq)
}

// all yields the joins of s (their Thread unset), in the order added;
// it stops at bytes it cannot read.
func (s joinSet) all(yield func(Join) bool) {
	for rest := s; ; {
		k, t, seq, r, ok := rest.next()
		if !ok || !yield(Join{Kind: k, Token: string(t), Seq: seq}) {
			return
		}
		rest = r
	}
}
