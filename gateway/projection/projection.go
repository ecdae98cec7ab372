// Package projection stores the relay's projections of the ledger
// (docs/scaling.md "Projections"): per group and thread, who takes part
// since which event; per event, who acked, answered, discharged or
// claimed it; per group and per actor, counts and the last event. They
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
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"sync"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// Schema is the version of the tables; a DB of another version is reset
// on Open, to be rebuilt from the ledger.
const Schema = 1

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
}

// GroupSummary is a group's projection.
type GroupSummary struct {
	Group     string
	Events    int64
	LastSeq   int64
	LastPos   int64
	LastTS    string
	LastEvent string
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
}

const schema = `
CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v ANY) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS joins(grp TEXT, thread TEXT, kind INTEGER, token TEXT, seq INTEGER,
	PRIMARY KEY(grp, thread, kind, token)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS marks(grp TEXT, event TEXT, kind INTEGER, actor TEXT,
	PRIMARY KEY(grp, event, kind, actor)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS groups(grp TEXT PRIMARY KEY, events INTEGER, last_seq INTEGER,
	last_pos INTEGER, last_ts TEXT, last_event TEXT) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS actors(key TEXT PRIMARY KEY, id TEXT, events INTEGER, addressed INTEGER,
	owes INTEGER, last_ts TEXT) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS owed(actor TEXT, event TEXT, msg TEXT, PRIMARY KEY(actor, event)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS owed_msg ON owed(actor, msg) WHERE msg != '';
`

// Open opens (creating it if needed) the projection DB in the file path,
// or in memory when path is "". A DB of another Schema is emptied: its
// high-water mark is then 0.
func Open(ctx context.Context, path string) (*DB, error) {
	var dsn string
	if path == "" {
		dsn = "file::memory:"
	} else {
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, fmt.Errorf("projection: open %q: %w", path, err)
		}
		u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs),
			RawQuery: "_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"}
		dsn = u.String()
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
		return nil, fmt.Errorf("projection: open %q: %w", path, err)
	}
	return p, nil
}

func (p *DB) migrate(ctx context.Context) error {
	if _, err := p.db.ExecContext(ctx, schema); err != nil {
		return err
	}
	var v int
	err := p.db.QueryRowContext(ctx, `SELECT v FROM meta WHERE k = 'schema'`).Scan(&v)
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
func (p *DB) Close() error { return p.db.Close() }

// Reset empties every projection and sets the high-water mark to 0.
func (p *DB) Reset(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	tx, err := p.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("projection: reset: %w", err)
	}
	defer tx.Rollback()
	for _, t := range []string{"meta", "joins", "marks", "groups", "actors", "owed"} {
		if _, err := tx.ExecContext(ctx, "DELETE FROM "+t); err != nil {
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
	var hwm int64
	if err := tx.QueryRowContext(ctx, `SELECT v FROM meta WHERE k = 'pos'`).Scan(&hwm); err != nil {
		return fmt.Errorf("projection: apply: %w", err)
	}
	a, err := prepareApplier(ctx, tx)
	if err != nil {
		return err
	}
	defer a.close()
	last := facts[len(facts)-1]
	for _, f := range facts {
		if f.Pos <= hwm {
			continue
		}
		if err := a.apply(ctx, f); err != nil {
			return fmt.Errorf("projection: apply event %s: %w", f.EventID, err)
		}
		last, hwm = f, f.Pos
	}
	if _, err := tx.ExecContext(ctx, `UPDATE meta SET v = CASE k WHEN 'pos' THEN ? ELSE ? END WHERE k IN ('pos', 'event')`, last.Pos, last.EventID); err != nil {
		return fmt.Errorf("projection: apply: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("projection: apply: %w", err)
	}
	return nil
}

// applier holds Apply's prepared statements.
type applier struct {
	join, mark, group, actor, owe, settle, owes *sql.Stmt
}

func prepareApplier(ctx context.Context, tx *sql.Tx) (*applier, error) {
	var a applier
	for _, s := range []struct {
		st **sql.Stmt
		q  string
	}{
		{&a.join, `INSERT INTO joins(grp, thread, kind, token, seq) VALUES(?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`},
		{&a.mark, `INSERT INTO marks(grp, event, kind, actor) VALUES(?, ?, ?, ?) ON CONFLICT DO NOTHING`},
		{&a.group, `INSERT INTO groups(grp, events, last_seq, last_pos, last_ts, last_event) VALUES(?1, 1, ?2, ?3, ?4, ?5)
			ON CONFLICT(grp) DO UPDATE SET events = events + 1, last_seq = ?2, last_pos = ?3, last_ts = ?4, last_event = ?5`},
		{&a.actor, `INSERT INTO actors(key, id, events, addressed, owes, last_ts) VALUES(?1, ?2, ?3, ?4, 0, ?5)
			ON CONFLICT(key) DO UPDATE SET events = events + ?3, addressed = addressed + ?4, last_ts = ?5`},
		{&a.owe, `INSERT INTO owed(actor, event, msg) VALUES(?, ?, ?) ON CONFLICT DO NOTHING`},
		{&a.settle, `DELETE FROM owed WHERE actor = ?1 AND (event = ?2 OR (msg = ?2 AND msg != ''))`},
		{&a.owes, `UPDATE actors SET owes = owes + ? WHERE key = ?`},
	} {
		st, err := tx.PrepareContext(ctx, s.q)
		if err != nil {
			a.close()
			return nil, fmt.Errorf("projection: apply: %w", err)
		}
		*s.st = st
	}
	return &a, nil
}

func (a *applier) close() {
	for _, st := range []*sql.Stmt{a.join, a.mark, a.group, a.actor, a.owe, a.settle, a.owes} {
		if st != nil {
			st.Close()
		}
	}
}

func (a *applier) apply(ctx context.Context, f Facts) error {
	if _, err := a.group.ExecContext(ctx, f.Group, f.Seq, f.Pos, f.TS, f.EventID); err != nil {
		return err
	}
	for _, j := range f.Joins {
		if _, err := a.join.ExecContext(ctx, f.Group, j.Thread, int(j.Kind), j.Token, f.Seq); err != nil {
			return err
		}
	}
	for _, m := range f.Marks {
		if _, err := a.mark.ExecContext(ctx, f.Group, m.Event, int(m.Kind), m.Actor); err != nil {
			return err
		}
	}
	for _, af := range f.Actors {
		key := strings.ToLower(af.ID)
		if _, err := a.actor.ExecContext(ctx, key, af.ID, b2i(af.Wrote), b2i(af.Addressed), f.TS); err != nil {
			return err
		}
		var delta int64
		for _, id := range af.Settles {
			if id == "" {
				continue
			}
			res, err := a.settle.ExecContext(ctx, key, id)
			if err != nil {
				return err
			}
			n, _ := res.RowsAffected()
			delta -= n
		}
		if af.Owes {
			res, err := a.owe.ExecContext(ctx, key, f.EventID, af.Msg)
			if err != nil {
				return err
			}
			n, _ := res.RowsAffected()
			delta += n
		}
		if delta != 0 {
			if _, err := a.owes.ExecContext(ctx, delta, key); err != nil {
				return err
			}
		}
	}
	return nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Joins returns the joins of the thread of group, in no order.
func (p *DB) Joins(ctx context.Context, group, thread string) ([]Join, error) {
	rows, err := p.db.QueryContext(ctx, `SELECT kind, token, seq FROM joins WHERE grp = ? AND thread = ?`, group, thread)
	if err != nil {
		return nil, fmt.Errorf("projection: joins of %q: %w", thread, err)
	}
	defer rows.Close()
	var out []Join
	for rows.Next() {
		j := Join{Thread: thread}
		if err := rows.Scan(&j.Kind, &j.Token, &j.Seq); err != nil {
			return nil, fmt.Errorf("projection: joins of %q: %w", thread, err)
		}
		out = append(out, j)
	}
	return out, rows.Err()
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

// Groups returns every group's summary, ordered by group id.
func (p *DB) Groups(ctx context.Context) ([]GroupSummary, error) {
	rows, err := p.db.QueryContext(ctx, `SELECT grp, events, last_seq, last_pos, last_ts, last_event FROM groups ORDER BY grp`)
	if err != nil {
		return nil, fmt.Errorf("projection: groups: %w", err)
	}
	defer rows.Close()
	var out []GroupSummary
	for rows.Next() {
		var g GroupSummary
		if err := rows.Scan(&g.Group, &g.Events, &g.LastSeq, &g.LastPos, &g.LastTS, &g.LastEvent); err != nil {
			return nil, fmt.Errorf("projection: groups: %w", err)
		}
		out = append(out, g)
	}
	return out, rows.Err()
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
		`SELECT 'join', grp, thread, kind, token, seq FROM joins ORDER BY grp, thread, kind, token`,
		`SELECT 'mark', grp, event, kind, actor, '' FROM marks ORDER BY grp, event, kind, actor`,
		`SELECT 'group', grp, events, last_seq, last_pos, last_ts || ' ' || last_event FROM groups ORDER BY grp`,
		`SELECT 'actor', key, id, events, addressed, owes || ' ' || last_ts FROM actors ORDER BY key`,
		`SELECT 'owed', actor, event, msg, '', '' FROM owed ORDER BY actor, event`,
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
