package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/bits"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway/ledger"
)

// op is one queued write. fn runs on the writer goroutine inside the
// batch transaction, under its own savepoint; done receives its outcome
// after COMMIT.
type op struct {
	ctx  context.Context
	fn   func(w *wtx) error
	done chan error
	// rec and res are a one-record append's (appendOne), which has no fn:
	// the writer appends rec and puts the outcome in res. Such appends
	// are held and inserted several in one statement (batch.hold).
	rec ledger.Record
	res ledger.Result
}

// appendOps recycles the ops of one-record appends with their done
// channels: the relay appends one record per envelope.
var appendOps = sync.Pool{New: func() any { return &op{done: make(chan error, 1)} }}

// appendOne appends r, a normalized record, as one single operation.
func (s *Store) appendOne(ctx context.Context, r ledger.Record) (ledger.Result, error) {
	o := appendOps.Get().(*op)
	o.ctx, o.rec = ctx, r
	answered, err := s.submitOp(ctx, o)
	if !answered {
		return ledger.Result{}, err // the writer may still use o: leave it to it
	}
	res := o.res
	// The writer and the syncer are done with o: done was its last use.
	*o = op{done: o.done}
	appendOps.Put(o)
	return res, err
}

// Prepared statements of the writer connection.
const (
	stByID = iota
	stByDedupe
	stAppend
	stLastSeq
	stSetSeq
	stInsertEvent
	stEventSeq
	stUpsertCursor
	stAdvanceCursor
	stGetCursor
	stGetClaim
	stUpsertClaim
	stDeleteClaim
	stImportOne // an imported event, nothing when its id, dedupe key or seq is taken
	stImportRun // importRun of them in one statement
	stMaxRowid
	stDeleteAfter
	stSavepointOp // the savepoint statements, prepared like the rest
	stRollbackOp
	stReleaseOp
	stSavepointEv
	stRollbackEv
	stReleaseEv
	stBegin // the batch transaction's, prepared like the rest
	stCommit
	stRollback
	stDataVersion
	stSetSeqs                             // stSetSeq of 2 to seqRun groups (setSeqStmt)
	stInsertRuns = stSetSeqs + seqRun - 1 // held appends' inserts of 1, 2, 4, … appendRun events (insertStmt)
	numStmts     = stInsertRuns + appendRunLog + 1
)

// Held one-record appends (batch.hold) are inserted appendRun at a time,
// or in runs of 8, 4, 2 and 1 for the rest: appendRun is 1<<appendRunLog.
const (
	appendRunLog = 4
	appendRun    = 1 << appendRunLog
)

// insertStmt returns the statement that inserts k held events, k a power
// of two ≤ appendRun.
func insertStmt(k int) int { return stInsertRuns + bits.Len(uint(k)) - 1 }

// seqRun is how many groups' last seqs one statement upserts (flushSeqs).
const seqRun = 8

// setSeqStmt returns the statement that upserts k groups' last seqs,
// 1 ≤ k ≤ seqRun.
func setSeqStmt(k int) int {
	if k == 1 {
		return stSetSeq
	}
	return stSetSeqs + k - 2
}

// stmtText is stmtBase, the stSetSeqs and the stInsertRuns.
var stmtText = func() [numStmts]string {
	var t [numStmts]string
	copy(t[:], stmtBase[:])
	for k := 2; k <= seqRun; k++ {
		t[setSeqStmt(k)] = strings.Replace(stmtBase[stSetSeq], ` VALUES (?, ?)`, ` VALUES (?, ?)`+strings.Repeat(`, (?, ?)`, k-1), 1)
	}
	// OR IGNORE, as stImportRun: a statement of several rows that could
	// abort on a constraint would need a statement journal. Whatever it
	// leaves out, a taken dedupe key or anything else, the held appends
	// are undone and go through append one at a time (wtx.insertHeld).
	for k := 1; k <= appendRun; k *= 2 {
		t[insertStmt(k)] = `INSERT OR IGNORE INTO events (id, group_id, seq, ts, kind, scope_key, by_, data, dedupe_key, v)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)` + strings.Repeat(`, (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, k-1)
	}
	return t
}()

var stmtBase = [stSetSeqs]string{
	stByID:     `SELECT ` + eventCols + ` FROM events WHERE id = ?`,
	stByDedupe: `SELECT ` + eventCols + ` FROM events WHERE dedupe_key = ?`,
	// An append: the event with the seq the writer assigned (wtx.lastSeq).
	// A taken dedupe key inserts nothing (no rows changed). It writes one
	// table and returns nothing, so SQLite runs it without a statement
	// journal: a trigger or a RETURNING clause (itself a trigger inside
	// SQLite) would make it journal every page it writes, which cost more
	// than the insert.
	stAppend: `INSERT INTO events (id, group_id, seq, ts, kind, scope_key, by_, data, dedupe_key, v)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (dedupe_key) DO NOTHING`,
	// A group's last seq, from the events themselves (one seek of
	// events_group_seq): the groups table is brought up to date only when
	// the transaction commits (wtx.flushSeqs).
	stLastSeq: `SELECT coalesce(max(seq), 0) FROM events WHERE group_id = ?`,
	// max: a group's last seq never goes back, whatever the memo says.
	stSetSeq: `INSERT INTO groups (group_id, last_seq) VALUES (?, ?)
		ON CONFLICT (group_id) DO UPDATE SET last_seq = max(last_seq, excluded.last_seq)`,
	stInsertEvent: `INSERT INTO events (id, group_id, seq, ts, kind, scope_key, by_, data, dedupe_key, v)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
	stEventSeq: `SELECT seq FROM events WHERE id = ? AND group_id = ?`,
	stUpsertCursor: `INSERT INTO cursors (group_id, actor, event_id, seq, updated_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (group_id, actor) DO UPDATE
		SET event_id = excluded.event_id, seq = excluded.seq, updated_at = excluded.updated_at`,
	stAdvanceCursor: `INSERT INTO cursors (group_id, actor, event_id, seq, updated_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (group_id, actor) DO UPDATE
		SET event_id = excluded.event_id, seq = excluded.seq, updated_at = excluded.updated_at
		WHERE excluded.seq > cursors.seq`,
	stGetCursor: `SELECT event_id, seq FROM cursors WHERE group_id = ? AND actor = ?`,
	stGetClaim:  `SELECT actor, claimed_at, expires_at FROM claims WHERE group_id = ? AND event_id = ?`,
	stUpsertClaim: `INSERT INTO claims (group_id, event_id, actor, claimed_at, expires_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (group_id, event_id) DO UPDATE
		SET actor = excluded.actor, claimed_at = excluded.claimed_at, expires_at = excluded.expires_at`,
	stDeleteClaim: `DELETE FROM claims WHERE group_id = ? AND event_id = ?`,
	// OR IGNORE, not ON CONFLICT DO NOTHING: with no constraint left
	// to abort it, SQLite runs the statement without a statement journal.
	stImportOne: `INSERT OR IGNORE INTO events (id, group_id, seq, ts, kind, scope_key, by_, data, dedupe_key, v)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
	stImportRun: `INSERT OR IGNORE INTO events (id, group_id, seq, ts, kind, scope_key, by_, data, dedupe_key, v)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)` + strings.Repeat(`, (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, importRun-1),
	stMaxRowid:    `SELECT coalesce(max(rowid), 0) FROM events`,
	stDeleteAfter: `DELETE FROM events WHERE rowid > ?`,
	stSavepointOp: `SAVEPOINT op`,
	stRollbackOp:  `ROLLBACK TO op`,
	stReleaseOp:   `RELEASE op`,
	stSavepointEv: `SAVEPOINT ev`,
	stRollbackEv:  `ROLLBACK TO ev`,
	stReleaseEv:   `RELEASE ev`,
	stBegin:       `BEGIN IMMEDIATE`,
	stCommit:      `COMMIT`,
	stRollback:    `ROLLBACK`,
	// Changes when another connection has committed (begin).
	stDataVersion: `PRAGMA data_version`,
}

// Savepoints: one per queued operation, and one per event inside an
// import. The value is the index of the SAVEPOINT statement; ROLLBACK TO
// and RELEASE follow it.
const (
	spOp    = stSavepointOp
	spEvent = stSavepointEv
)

// submit queues fn for the writer and waits for its outcome. If ctx ends
// after fn was queued, submit returns ctx's error, but fn may still run
// and commit.
func (s *Store) submit(ctx context.Context, fn func(w *wtx) error) error {
	_, err := s.submitOp(ctx, &op{ctx: ctx, fn: fn, done: make(chan error, 1)})
	return err
}

// submitOp queues o, whose done channel is empty, and waits for its
// outcome. answered reports that the outcome was received from o.done, or
// that o was never queued: either way no other goroutine uses o any more.
func (s *Store) submitOp(ctx context.Context, o *op) (answered bool, err error) {
	if err := ctx.Err(); err != nil {
		return true, err
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return true, ledger.ErrClosed
	}
	select {
	case s.queue <- o:
	case <-ctx.Done():
		s.mu.RUnlock()
		return true, ctx.Err()
	}
	s.mu.RUnlock()
	select {
	case err := <-o.done:
		return true, err
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// writer is the single writer goroutine. It runs queued operations in
// an open transaction and commits it once no other commit awaits its
// fsync. If operations are waiting then, the syncer fsyncs the commit
// while the writer runs them in the next transaction, which commits when
// that fsync is done: the fsync overlaps the writer's work instead of
// stopping it, and under load each transaction carries everything that
// arrived during one fsync. A lone operation with nothing waiting is
// fsynced by the writer itself (see finish), sparing its caller two
// goroutine hand-offs. It exits when Close has closed the queue and
// everything queued is committed.
//
// When the last commit carried several operations (callers are
// arriving concurrently) and the open transaction has few, the writer
// first waits for more, at most as long as the last fsync took (see
// lingerFor): a commit costs about as much CPU as ten appends (its WAL
// writes, the fsync, the checkpoints), and on a fast disk the pipeline
// would otherwise commit every few appends. A lone caller never waits.
func (s *Store) writer() {
	defer close(s.toSync)
	var (
		b        *batch // the open transaction, nil when none
		inFlight bool   // a commit is with the syncer
		queue    = s.queue
		prevOps  int         // operations in the last commit
		linger   *time.Timer // while b waits for more operations
	)
	for {
		if b != nil && !inFlight {
			b.drain(queue)
			if !b.lingered && queue != nil {
				b.lingered = true
				if d := lingerFor(prevOps, len(b.ops), s.lingerOps(), time.Duration(s.lastSync.Load())); d > 0 {
					linger = time.NewTimer(d)
				}
			}
			if linger == nil || queue == nil || len(b.ops) >= s.lingerOps() {
				if linger != nil {
					linger.Stop()
					linger = nil
				}
				prevOps = len(b.ops)
				lone := prevOps == 1
				if c, ok := b.commit(); ok {
					if lone && len(queue) == 0 {
						// Nothing to overlap with: sync here and spare
						// a lone caller two goroutine hand-offs. A batch
						// of several means callers are arriving: the
						// syncer takes the fsync, so that the writer can
						// run the next ones meanwhile.
						s.finish(c)
					} else {
						s.toSync <- c
						inFlight = true
					}
				}
				b = nil
				continue
			}
		}
		if queue == nil && b == nil {
			return // the syncer finishes the commit in flight
		}
		var ops <-chan *op
		if queue != nil && (b == nil || len(b.ops) < s.maxBatch) {
			ops = queue
		}
		var synced <-chan struct{}
		if inFlight {
			synced = s.synced
		}
		var lingered <-chan time.Time
		if linger != nil {
			lingered = linger.C
		}
		select {
		case o, ok := <-ops:
			if !ok {
				queue = nil
				continue
			}
			if b == nil {
				b = s.begin()
			}
			b.run(o)
		case <-synced:
			inFlight = false
		case <-lingered:
			linger = nil // commit now
		}
	}
}

// Group commit's wait for more operations (writer, lingerFor).
const (
	lingerOps = 32                     // a transaction this large commits at once
	maxLinger = 500 * time.Microsecond // the longest wait, whatever the disk
)

// lingerOps is how many operations end a transaction's wait for more:
// lingerOps, or fewer when Options.MaxBatch caps transactions lower.
func (s *Store) lingerOps() int { return min(lingerOps, s.maxBatch) }

// lingerFor returns how long a transaction holding ops operations waits
// for more before it commits, when the last commit carried prevOps and the
// last fsync took lastSync: as long as that fsync (so that a commit lands
// at most every other fsync's time), at most maxLinger, and not at all for
// a lone caller (the last commit had one operation) or once the
// transaction holds enough (full). The WAL writes and the fsync of a
// commit cost as much CPU as ten appends; at 64 clients on a fast disk the
// writer committed every 3 appends.
func lingerFor(prevOps, ops, full int, lastSync time.Duration) time.Duration {
	if prevOps < 2 || ops >= full {
		return 0
	}
	return min(lastSync, maxLinger)
}

// batch is one write transaction of the writer and the operations in it.
type batch struct {
	s     *Store
	start time.Time
	w     *wtx  // nil when the transaction could not begin or broke
	err   error // why w is nil: every op in the batch fails with it
	ops   []*op
	errs  []error
	// lingered: the writer has decided whether this transaction waits
	// for more operations (lingerFor); it decides once.
	lingered bool
	// held are one-record appends whose events are made (seq, id, ts) but
	// not inserted yet: they are inserted appendRun at a time, before any
	// other op runs, and before COMMIT (flushHeld).
	held []*op
}

// begin opens the next write transaction on the writer's connection. A
// caller's cancellation must not abort the others' transaction, so its
// statements run without a context.
func (s *Store) begin() *batch {
	b := &batch{s: s, start: time.Now()}
	if p := s.broken.Load(); p != nil {
		b.err = *p
		return b
	}
	_, err := s.exec(stBegin, nil)
	if err != nil {
		// A transaction left open (a ROLLBACK that failed after an
		// error) is ended here, and BEGIN tried once more; when none
		// was open, ROLLBACK fails and BEGIN's error stands.
		if _, rerr := s.stmts[stRollback].Exec(); rerr == nil {
			_, err = s.exec(stBegin, nil)
		}
	}
	var version int64
	if err == nil {
		version, err = s.queryInt(stDataVersion)
		if err != nil {
			s.stmts[stRollback].Exec()
		}
	}
	if err != nil {
		b.err = fmt.Errorf("begin: %w", err)
		return b
	}
	// The groups' last seqs of the last transaction still hold if it
	// committed and no other connection has committed since.
	if !s.seqsKept || version != s.dataVersion || len(s.seqs) > maxSeqs {
		clear(s.seqs)
	}
	s.dataVersion, s.seqsKept = version, false
	b.w = &wtx{s: s, seqs: s.seqs}
	return b
}

// maxSeqs bounds how many groups' last seqs the writer keeps between
// transactions.
const maxSeqs = 1 << 12

// run runs o in the transaction under its own savepoint. If o fails, its
// writes are undone and the others' kept; if the savepoint itself fails,
// the transaction is rolled back and every op in it fails.
func (b *batch) run(o *op) {
	b.ops = append(b.ops, o)
	b.errs = append(b.errs, nil)
	i := len(b.ops) - 1
	if b.w == nil {
		return // failed already; commit reports b.err
	}
	if err := o.ctx.Err(); err != nil {
		b.errs[i] = err // the caller is gone; don't write on its behalf
		return
	}
	if o.fn == nil {
		b.hold(o)
		return
	}
	b.flushHeld() // the held appends come first
	if b.w == nil {
		return
	}
	mark := len(b.w.pending)
	ferr, err := b.w.savepoint(spOp, o.fn)
	if err != nil {
		b.w.rollback()
		b.w, b.err = nil, err
		return
	}
	if ferr != nil {
		b.errs[i] = ferr
		b.w.pending = b.w.pending[:mark]
	}
}

// hold makes the event of o, a one-record append, and holds it for
// flushHeld to insert with others in one statement: the statements
// around each insert (binding, the transaction's and cursors' upkeep)
// cost as much as a third of a lone insert. The event takes the group's
// next seq (w.seqs) now. If o fails, as a single op, so does the
// transaction.
func (b *batch) hold(o *op) {
	ev, err := b.w.event(o.rec)
	if err != nil {
		b.w.rollback()
		b.w, b.err = nil, err
		return
	}
	b.w.seqs[ev.GroupID] = ev.Seq
	o.res = ledger.Result{Event: ev}
	b.held = append(b.held, o)
	if len(b.held) == appendRun {
		b.flushHeld()
	}
}

// flushHeld inserts the held appends, appendRun at a time, then in runs
// of halving sizes.
func (b *batch) flushHeld() {
	held := b.held
	for len(held) > 0 && b.w != nil {
		k := 1 << (bits.Len(uint(min(len(held), appendRun))) - 1)
		n, err := b.w.insertHeld(held, k)
		if err != nil {
			b.w.rollback()
			b.w, b.err = nil, err
		}
		held = held[n:]
	}
	clear(b.held)
	b.held = b.held[:0]
}

// drain runs whatever is queued now, without waiting, up to MaxBatch.
func (b *batch) drain(queue <-chan *op) {
	for len(b.ops) < b.s.maxBatch {
		select {
		case o, ok := <-queue:
			if !ok {
				return
			}
			b.run(o)
		default:
			return
		}
	}
}

// commit commits the transaction and returns it for the fsync that makes
// it durable (finish answers the ops after it). When the transaction
// failed, commit answers every op at once and returns false.
func (b *batch) commit() (committed, bool) {
	s := b.s
	b.flushHeld()
	if b.w != nil {
		if err := b.w.flushSeqs(); err != nil {
			b.w.rollback()
			b.w, b.err = nil, err
		}
	}
	if b.w != nil {
		if _, err := s.exec(stCommit, nil); err != nil {
			b.w.rollback() // a failed COMMIT leaves the transaction open
			b.w, b.err = nil, fmt.Errorf("commit: %w", err)
		} else {
			s.seqsKept = true
		}
	}
	if b.w == nil {
		s.log.Error("sqlite: write transaction failed", "path", s.path, "ops", len(b.ops), "err", b.err)
		for i, o := range b.ops {
			if b.errs[i] == nil {
				b.errs[i] = b.err
			}
			o.done <- b.errs[i]
		}
		return committed{}, false
	}
	// ops before commits, and Stats loads them the other way round: a
	// snapshot never shows more commits than operations.
	s.ops.Add(int64(len(b.ops)))
	s.commits.Add(1)
	s.events.Add(int64(len(b.w.pending)))
	s.log.Debug("sqlite: committed", "ops", len(b.ops), "dur", time.Since(b.start))
	return committed{batch: b.ops, errs: b.errs, groups: b.w.pending}, true
}

// wtx is the state of one batch transaction on the writer goroutine.
type wtx struct {
	s       *Store
	pending []string // groups appended to, to wake their followers after COMMIT
	// seqs holds the last seq of every group the transaction has read or
	// moved (lastSeq): no other connection can append while the writer
	// holds SQLite's write lock, from BEGIN IMMEDIATE to COMMIT. A
	// rollback to a savepoint empties it (savepoint), since it may undo
	// appends. It is the Store's map, kept from one transaction to the
	// next unless something else wrote in between (begin).
	seqs map[string]int64
}

// lastSeq returns the last seq of group in the transaction so far: 0 for
// a group with no event.
func (w *wtx) lastSeq(group string) (int64, error) {
	if l, ok := w.seqs[group]; ok {
		return l, nil
	}
	var l int64
	if err := w.stmt(stLastSeq).QueryRow(group).Scan(&l); err != nil {
		return 0, fmt.Errorf("last seq of %q: %w", group, err)
	}
	w.seqs[group] = l
	return l, nil
}

// flushSeqs brings the groups table up to date with the events the
// transaction stored, before it commits: one upsert per group appended
// to, rather than one per event (a trigger on events did that, and made
// every append journal its pages).
func (w *wtx) flushSeqs() error {
	done := w.s.flushed
	clear(done)
	args := w.s.seqArgs[:0]
	defer clear(w.s.seqArgs[:])
	for _, g := range w.pending {
		if done[g] {
			continue
		}
		done[g] = true
		l, err := w.lastSeq(g)
		if err != nil {
			return err
		}
		args = append(args, driver.NamedValue{Ordinal: len(args) + 1, Value: g}, driver.NamedValue{Ordinal: len(args) + 2, Value: l})
		if len(args) == len(w.s.seqArgs) {
			if err := w.setSeqs(args); err != nil {
				return err
			}
			args = args[:0]
		}
	}
	if len(args) > 0 {
		return w.setSeqs(args)
	}
	return nil
}

// setSeqs upserts the groups' last seqs in args, (group, seq) pairs, in
// one statement.
func (w *wtx) setSeqs(args []driver.NamedValue) error {
	if _, err := w.s.exec(setSeqStmt(len(args)/2), args); err != nil {
		return fmt.Errorf("last seq of %d groups from %q: %w", len(args)/2, args[0].Value, err)
	}
	return nil
}

// rollback undoes the transaction. Its error is not the callers': they
// fail with the error that made the writer roll back, and a transaction
// a failed ROLLBACK leaves open is ended by the next begin.
func (w *wtx) rollback() { w.s.stmts[stRollback].Exec() }

// savepoint runs fn under a savepoint: on fn's error (ferr) its writes
// are undone. err reports a failure of the savepoint statements
// themselves, after which the transaction is unusable.
func (w *wtx) savepoint(sp int, fn func(w *wtx) error) (ferr, err error) {
	if _, err := w.stmt(sp).Exec(); err != nil {
		return nil, fmt.Errorf("savepoint: %w", err)
	}
	if ferr = fn(w); ferr != nil {
		clear(w.seqs) // the rollback may take back appends
		if _, err := w.stmt(sp + 1).Exec(); err != nil {
			return ferr, fmt.Errorf("rollback to savepoint: %w", err)
		}
	}
	if _, err := w.stmt(sp + 2).Exec(); err != nil {
		return ferr, fmt.Errorf("release savepoint: %w", err)
	}
	return ferr, nil
}

// rawStmt reports whether statement i runs on the driver's connection
// (exec, queryInt) rather than through database/sql: the append and the
// batch's BEGIN, data_version, groups upserts and COMMIT, the statements
// of every append.
func rawStmt(i int) bool {
	return i == stAppend || i == stBegin || i == stCommit || i == stSetSeq || i >= stSetSeqs || i == stDataVersion
}

// prepareRaw prepares statement i (a rawStmt) on wconn's driver
// connection. database/sql's Stmt costs each execution a lookup of its
// connection, a conversion of every argument, and locks; the writer's
// connection is its alone, so exec skips all that.
func (s *Store) prepareRaw(ctx context.Context, i int) error {
	return s.wconn.Raw(func(dc any) error {
		p, ok := dc.(driver.ConnPrepareContext)
		if !ok {
			return fmt.Errorf("driver connection %T cannot prepare with a context", dc)
		}
		st, err := p.PrepareContext(ctx, stmtText[i])
		if err != nil {
			return err
		}
		ex, ok := st.(driver.StmtExecContext)
		if _, q := st.(driver.StmtQueryContext); !ok || i == stDataVersion && !q {
			st.Close()
			return fmt.Errorf("driver statement %T cannot execute or query with a context", st)
		}
		s.raw[i] = ex
		return nil
	})
}

// exec runs raw statement i (rawStmt) with args, which are driver values
// (string, int64, nil). It runs inside (*sql.Conn).Raw, which holds the
// connection's lock: the driver's statement is used only while
// database/sql lends the connection out, and never after Close. Without
// a context, like the writer's other statements (see begin).
func (s *Store) exec(i int, args []driver.NamedValue) (driver.Result, error) {
	var (
		res driver.Result
		err error
	)
	if rerr := s.wconn.Raw(func(any) error {
		res, err = s.raw[i].ExecContext(context.Background(), args)
		return nil // the statement's error is not the connection's
	}); rerr != nil {
		return nil, rerr
	}
	return res, err
}

// queryInt runs raw statement i, a query whose first row is one integer,
// like exec, and returns that integer.
func (s *Store) queryInt(i int) (v int64, err error) {
	if rerr := s.wconn.Raw(func(any) error {
		rows, qerr := s.raw[i].(driver.StmtQueryContext).QueryContext(context.Background(), nil)
		if qerr != nil {
			err = qerr
			return nil
		}
		dest := s.rawDest[:]
		switch nerr := rows.Next(dest); {
		case errors.Is(nerr, io.EOF):
			err = sql.ErrNoRows
		case nerr != nil:
			err = nerr
		default:
			var ok bool
			if v, ok = dest[0].(int64); !ok {
				err = fmt.Errorf("%s: got %T, want an integer", stmtText[i], dest[0])
			}
		}
		clear(dest)
		if cerr := rows.Close(); err == nil {
			err = cerr
		}
		return nil
	}); rerr != nil {
		return 0, rerr
	}
	return v, err
}

// closeRaw closes the rawStmt statements, before wconn closes.
func (s *Store) closeRaw() error {
	if s.wconn == nil {
		return nil
	}
	var errs []error
	err := s.wconn.Raw(func(any) error {
		for i, st := range s.raw {
			if st != nil {
				errs = append(errs, st.(driver.Stmt).Close())
				s.raw[i] = nil
			}
		}
		return nil
	})
	return errors.Join(append(errs, err)...)
}

// stmt returns prepared statement i of the writer's connection, on which
// the transaction is open.
func (w *wtx) stmt(i int) *sql.Stmt { return w.s.stmts[i] }

// ts returns the time stamp for the next appended event: the clock, but
// never earlier than the last one this Store assigned.
func (w *wtx) ts() string {
	t := w.s.now().UTC().Truncate(time.Millisecond)
	if !t.After(w.s.lastTS) && w.s.lastTSText != "" {
		return w.s.lastTSText // the same millisecond: the batch's appends mostly share one
	}
	w.s.lastTS = t
	w.s.lastTSText = ledger.FormatTime(t)
	return w.s.lastTSText
}

// append appends r with one write statement (stAppend): a new event, or,
// when r's dedupe key is taken, the event that holds it.
func (w *wtx) append(r ledger.Record) (ledger.Result, error) {
	ev, err := w.event(r)
	if err != nil {
		return ledger.Result{}, err
	}
	var (
		n   int64 // rows inserted: 0 when the dedupe key is taken
		pos int64 // the rowid: the event's log position (Store.Log)
	)
	args := &w.s.rawArgs
	w.s.bindEvent(args[:], 1, &ev)
	res, err := w.s.exec(stAppend, args[:])
	clear(args[:]) // keep no reference to the record's data
	w.s.emptyPacked()
	if err == nil {
		n, err = res.RowsAffected()
	}
	if err == nil && n == 1 {
		pos, err = res.LastInsertId()
	}
	if err == nil && n != 1 && r.DedupeKey == "" {
		err = fmt.Errorf("%d rows inserted", n)
	}
	if err != nil {
		return ledger.Result{}, fmt.Errorf("append event %s to %q: %w", ev.ID, r.GroupID, err)
	}
	if n == 0 {
		old, err := scanEvent(w.stmt(stByDedupe).QueryRow(r.DedupeKey))
		if err != nil {
			return ledger.Result{}, fmt.Errorf("dedupe lookup: %w", err)
		}
		return ledger.Result{Event: old, Duplicate: true}, nil
	}
	w.seqs[ev.GroupID] = ev.Seq
	w.pending = append(w.pending, ev.GroupID)
	return ledger.Result{Event: ev, Pos: pos}, nil
}

// bindEvent puts ev's ten columns, in stAppend's order, in args[:10],
// numbered from first (a multi-row insert's row j starts at 10*j+1). The
// data's packed blob goes to the writer's scratch (Store.packed), which
// the caller empties after the statement ran.
func (s *Store) bindEvent(args []driver.NamedValue, first int, ev *ledger.Event) {
	for c, v := range [...]any{ev.ID, ev.GroupID, ev.Seq, ev.TS, ev.Kind, ev.ScopeKey, ev.By, pack(&s.packed, ev.Data), nullable(ev.DedupeKey), int64(ev.V)} {
		args[c] = driver.NamedValue{Ordinal: first + c, Value: v}
	}
}

// emptyPacked makes the packed blobs' scratch room for the next
// statement's, once the driver has copied them; a scratch a large
// event grew is dropped.
func (s *Store) emptyPacked() {
	if cap(s.packed) > maxPackedScratch {
		s.packed = nil
	}
	s.packed = s.packed[:0]
}

// maxPackedScratch bounds the room Store.packed keeps between
// statements: sixteen envelopes' events of 8 KiB.
const maxPackedScratch = 128 << 10

// event returns the event that appends r next in its group: its seq
// follows the group's last in w.seqs, which it leaves as it is.
func (w *wtx) event(r ledger.Record) (ledger.Event, error) {
	last, err := w.lastSeq(r.GroupID)
	if err != nil {
		return ledger.Event{}, fmt.Errorf("append to %q: %w", r.GroupID, err)
	}
	return ledger.Event{
		V:         ledger.Version,
		ID:        envelope.NewID(),
		TS:        w.ts(),
		Kind:      r.Kind,
		GroupID:   r.GroupID,
		ScopeKey:  r.ScopeKey,
		By:        r.By,
		Data:      r.Data,
		DedupeKey: r.DedupeKey,
		Seq:       last + 1,
	}, nil
}

// insertHeld inserts the events of held[:k], held appends (batch.hold),
// in one statement, puts their log positions in their results and
// returns k. If the statement leaves any out (a dedupe key taken, by an
// earlier event or within the run), it removes those it inserted, gives
// the groups back their last seqs from before held (the seqs of the held
// appends after the run were made from the run's), and appends every
// record of held one at a time (append), which tells a duplicate from a
// conflict: it returns len(held). An error is the transaction's, as a
// single op's.
func (w *wtx) insertHeld(held []*op, k int) (int, error) {
	run := held[:k]
	args := w.s.runArgs[:10*k]
	for j, o := range run {
		w.s.bindEvent(args[10*j:], 10*j+1, &o.res.Event)
	}
	res, err := w.s.exec(insertStmt(k), args)
	clear(args) // keep no reference to the records' data
	w.s.emptyPacked()
	var n, last int64 // rows inserted; the last one's rowid
	if err == nil {
		n, err = res.RowsAffected()
	}
	if err == nil && n > 0 {
		last, err = res.LastInsertId()
	}
	if err != nil {
		return k, fmt.Errorf("append %d events from %s: %w", k, run[0].res.Event.ID, err)
	}
	if n == int64(k) {
		// The single writer's new rowids are the last one plus one.
		for j, o := range run {
			o.res.Pos = last - int64(k-1-j)
			w.pending = append(w.pending, o.res.Event.GroupID)
		}
		return k, nil
	}
	if n > 0 {
		// Those inserted are the last n rowids.
		if _, err := w.stmt(stDeleteAfter).Exec(last - n); err != nil {
			return k, fmt.Errorf("append: undo %d events from %s: %w", n, run[0].res.Event.ID, err)
		}
	}
	for j := len(held) - 1; j >= 0; j-- { // a group's first seq in held is the one to go back to
		ev := &held[j].res.Event
		w.seqs[ev.GroupID] = ev.Seq - 1
	}
	for _, o := range held {
		var err error
		if o.res, err = w.append(o.rec); err != nil {
			return len(held), err
		}
	}
	return len(held), nil
}

// insert stores ev, whose seq is its group's next, as it is.
func (w *wtx) insert(ev ledger.Event) error {
	_, err := w.stmt(stInsertEvent).Exec(ev.ID, ev.GroupID, ev.Seq, ev.TS, ev.Kind, ev.ScopeKey, ev.By, pack(nil, ev.Data), nullable(ev.DedupeKey), ev.V)
	if err != nil {
		return fmt.Errorf("insert event %s: %w", ev.ID, err)
	}
	w.seqs[ev.GroupID] = ev.Seq
	w.pending = append(w.pending, ev.GroupID)
	return nil
}

// importRun is how many imported events one statement inserts (stImportRun).
const importRun = 64

// importEvents stores evs as they are, in order, and returns how many were
// stored or found already present before the first refusal (refused). err
// is a failure of the transaction itself: nothing of it may be committed.
//
// The common case, a run of events each continuing its group's seq with
// ids and dedupe keys not yet taken, costs one statement per importRun
// events instead of the lookups and savepoint of importEvent: the seqs are
// checked against the groups' last seqs, kept in memory during the call,
// and the unique indexes check the rest. If an event of a run is not
// inserted, the run is undone and its events go one at a time through
// importEvent, which tells an event imported before from a conflict.
func (w *wtx) importEvents(evs []ledger.Event) (n int, refused, err error) {
	for n < len(evs) {
		var before map[string]int64 // last seqs before the run, to undo it
		k := 0
		for ; n+k < len(evs) && k < importRun; k++ {
			ev := evs[n+k]
			l, err := w.lastSeq(ev.GroupID)
			if err != nil {
				return n, nil, err
			}
			if ev.Seq != l+1 {
				break
			}
			if before == nil {
				before = make(map[string]int64)
			}
			if _, ok := before[ev.GroupID]; !ok {
				before[ev.GroupID] = l
			}
			w.seqs[ev.GroupID] = ev.Seq // the run's, until insertRun fails
		}
		run := evs[n : n+k]
		if k > 0 {
			ok, err := w.insertRun(run, before)
			if err != nil {
				return n, nil, err
			}
			if ok {
				n += k
				continue
			}
		} else {
			run = evs[n : n+1] // not its group's next: present already, or a conflict
		}
		for _, ev := range run {
			ferr, err := w.importEvent(ev)
			if err != nil {
				return n, nil, err
			}
			if ferr != nil {
				return n, ferr, nil
			}
			n++
		}
	}
	return n, nil, nil
}

// insertRun inserts the events of run, whose seqs continue their groups
// (whose last seqs were before; w.seqs has the run's), and reports whether
// every one was inserted. If not, it removes those it inserted and
// restores the groups' last seqs in w.seqs: without a savepoint, whose
// journal of every page the run touches costs more than the insert itself.
func (w *wtx) insertRun(run []ledger.Event, before map[string]int64) (bool, error) {
	var rowid int64 // the last row before the run: the single writer's rowids only grow
	if err := w.stmt(stMaxRowid).QueryRow().Scan(&rowid); err != nil {
		return false, fmt.Errorf("import: last rowid: %w", err)
	}
	var inserted int64
	if len(run) == importRun {
		args := make([]any, 0, 10*importRun)
		for _, ev := range run {
			args = append(args, ev.ID, ev.GroupID, ev.Seq, ev.TS, ev.Kind, ev.ScopeKey, ev.By, pack(nil, ev.Data), nullable(ev.DedupeKey), ev.V)
		}
		res, err := w.stmt(stImportRun).Exec(args...)
		if err == nil {
			inserted, err = res.RowsAffected()
		}
		if err != nil {
			return false, fmt.Errorf("import events from %s: %w", run[0].ID, err)
		}
	} else {
		for _, ev := range run {
			res, err := w.stmt(stImportOne).Exec(ev.ID, ev.GroupID, ev.Seq, ev.TS, ev.Kind, ev.ScopeKey, ev.By, pack(nil, ev.Data), nullable(ev.DedupeKey), ev.V)
			var c int64
			if err == nil {
				c, err = res.RowsAffected()
			}
			if err != nil {
				return false, fmt.Errorf("import event %s: %w", ev.ID, err)
			}
			inserted += c
		}
	}
	if inserted == int64(len(run)) {
		for _, ev := range run {
			w.pending = append(w.pending, ev.GroupID)
		}
		return true, nil
	}
	// An id or dedupe key was taken: undo the run.
	if _, err := w.stmt(stDeleteAfter).Exec(rowid); err != nil {
		return false, fmt.Errorf("import: undo a run: %w", err)
	}
	maps.Copy(w.seqs, before)
	return false, nil
}

// text is event data as the statements bind it, a TEXT value, without
// the copy string(data) makes: the driver copies every bound string into
// SQLite's own memory (sqlite3_bind_text), and the data does not change
// while the statement runs.
func text(data []byte) string { return unsafe.String(unsafe.SliceData(data), len(data)) }

// nullable is a dedupe key as stored: NULL for none.
func nullable(key string) any {
	if key == "" {
		return nil
	}
	return key
}

// importEvent stores ev as it is, under its own savepoint. ferr is its
// refusal; err a failure of the savepoint, after which the transaction is
// unusable.
func (w *wtx) importEvent(ev ledger.Event) (ferr, err error) {
	return w.savepoint(spEvent, func(w *wtx) error {
		old, err := scanEvent(w.stmt(stByID).QueryRow(ev.ID))
		switch {
		case err == nil && ledger.Equal(old, ev):
			return nil // already imported
		case err == nil:
			return fmt.Errorf("%w: event %s exists with different content", ledger.ErrConflict, ev.ID)
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		if ev.DedupeKey != "" {
			old, err := scanEvent(w.stmt(stByDedupe).QueryRow(ev.DedupeKey))
			switch {
			case err == nil:
				return fmt.Errorf("%w: dedupe key %q belongs to event %s", ledger.ErrConflict, ev.DedupeKey, old.ID)
			case !errors.Is(err, sql.ErrNoRows):
				return err
			}
		}
		last, err := w.lastSeq(ev.GroupID)
		if err != nil {
			return err
		}
		if ev.Seq != last+1 {
			return fmt.Errorf("%w: seq %d in group %q, want %d", ledger.ErrConflict, ev.Seq, ev.GroupID, last+1)
		}
		return w.insert(ev)
	})
}

// eventSeq returns the seq of eventID in group, or ErrNotFound.
func (w *wtx) eventSeq(group, eventID string) (int64, error) {
	var seq int64
	err := w.stmt(stEventSeq).QueryRow(eventID, group).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("event %s in group %q: %w", eventID, group, ledger.ErrNotFound)
	}
	return seq, err
}

// claim returns the stored claim on the event, expired or not.
func (w *wtx) claim(group, eventID string) (ledger.Claim, bool, error) {
	c, err := scanClaim(w.stmt(stGetClaim).QueryRow(group, eventID), group, eventID)
	if errors.Is(err, sql.ErrNoRows) {
		return ledger.Claim{}, false, nil
	}
	if err != nil {
		return ledger.Claim{}, false, err
	}
	return c, true, nil
}
