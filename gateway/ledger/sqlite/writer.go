package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

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
}

// Prepared statements of the writer connection.
const (
	stByID = iota
	stByDedupe
	stNextSeq
	stLastSeq
	stSetSeq
	stInsertEvent
	stEventSeq
	stUpsertCursor
	stGetClaim
	stUpsertClaim
	stDeleteClaim
	numStmts
)

var stmtText = [numStmts]string{
	stByID:     `SELECT ` + eventCols + ` FROM events WHERE id = ?`,
	stByDedupe: `SELECT ` + eventCols + ` FROM events WHERE dedupe_key = ?`,
	stNextSeq: `INSERT INTO groups (group_id, last_seq) VALUES (?, 1)
		ON CONFLICT (group_id) DO UPDATE SET last_seq = last_seq + 1 RETURNING last_seq`,
	stLastSeq: `SELECT last_seq FROM groups WHERE group_id = ?`,
	stSetSeq: `INSERT INTO groups (group_id, last_seq) VALUES (?, ?)
		ON CONFLICT (group_id) DO UPDATE SET last_seq = excluded.last_seq`,
	stInsertEvent: `INSERT INTO events (id, group_id, seq, ts, kind, scope_key, by_, data, dedupe_key, v)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
	stEventSeq: `SELECT seq FROM events WHERE id = ? AND group_id = ?`,
	stUpsertCursor: `INSERT INTO cursors (group_id, actor, event_id, seq, updated_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (group_id, actor) DO UPDATE
		SET event_id = excluded.event_id, seq = excluded.seq, updated_at = excluded.updated_at`,
	stGetClaim: `SELECT actor, claimed_at, expires_at FROM claims WHERE group_id = ? AND event_id = ?`,
	stUpsertClaim: `INSERT INTO claims (group_id, event_id, actor, claimed_at, expires_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (group_id, event_id) DO UPDATE
		SET actor = excluded.actor, claimed_at = excluded.claimed_at, expires_at = excluded.expires_at`,
	stDeleteClaim: `DELETE FROM claims WHERE group_id = ? AND event_id = ?`,
}

// submit queues fn for the writer and waits for its outcome. If ctx ends
// after fn was queued, submit returns ctx's error, but fn may still run
// and commit.
func (s *Store) submit(ctx context.Context, fn func(w *wtx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	o := &op{ctx: ctx, fn: fn, done: make(chan error, 1)}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return ledger.ErrClosed
	}
	select {
	case s.queue <- o:
	case <-ctx.Done():
		s.mu.RUnlock()
		return ctx.Err()
	}
	s.mu.RUnlock()
	select {
	case err := <-o.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// writer is the single writer goroutine: it group-commits whatever is
// queued until Close closes the queue and it is drained.
func (s *Store) writer() {
	defer close(s.done)
	batch := make([]*op, 0, s.maxBatch)
	for first := range s.queue {
		batch = append(batch[:0], first)
	drain:
		for len(batch) < s.maxBatch {
			select {
			case o, ok := <-s.queue:
				if !ok {
					break drain
				}
				batch = append(batch, o)
			default:
				break drain
			}
		}
		s.commit(batch)
		clear(batch)
	}
}

// commit runs batch in one transaction and answers every op.
func (s *Store) commit(batch []*op) {
	start := time.Now()
	ctx := context.Background() // a caller's cancellation must not abort the others' transaction
	errs := make([]error, len(batch))
	fail := func(err error) {
		s.log.Error("sqlite: write transaction failed", "path", s.path, "ops", len(batch), "err", err)
		for i, o := range batch {
			if errs[i] == nil {
				errs[i] = err
			}
			o.done <- errs[i]
		}
	}
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		fail(fmt.Errorf("begin: %w", err))
		return
	}
	w := &wtx{s: s, ctx: ctx, tx: tx}
	for i, o := range batch {
		if err := o.ctx.Err(); err != nil {
			errs[i] = err // the caller is gone; don't write on its behalf
			continue
		}
		mark := len(w.pending)
		ferr, err := w.savepoint("op", o.fn)
		if err != nil {
			tx.Rollback()
			fail(err)
			return
		}
		if ferr != nil {
			errs[i] = ferr
			w.pending = w.pending[:mark]
		}
	}
	if err := tx.Commit(); err != nil {
		fail(fmt.Errorf("commit: %w", err))
		return
	}
	s.commits.Add(1)
	s.ops.Add(int64(len(batch)))
	s.events.Add(int64(len(w.pending)))
	notified := make(map[string]bool)
	for _, g := range w.pending {
		if !notified[g] {
			notified[g] = true
			s.notes.notify(g)
		}
	}
	s.log.Debug("sqlite: committed", "ops", len(batch), "dur", time.Since(start))
	for i, o := range batch {
		o.done <- errs[i]
	}
}

// wtx is the state of one batch transaction on the writer goroutine.
type wtx struct {
	s       *Store
	ctx     context.Context
	tx      *sql.Tx
	st      [numStmts]*sql.Stmt
	pending []string // groups appended to, to wake their followers after COMMIT
}

// savepoint runs fn under a savepoint: on fn's error (ferr) its writes
// are undone. err reports a failure of the savepoint statements
// themselves, after which the transaction is unusable.
func (w *wtx) savepoint(name string, fn func(w *wtx) error) (ferr, err error) {
	if _, err := w.tx.ExecContext(w.ctx, "SAVEPOINT "+name); err != nil {
		return nil, fmt.Errorf("savepoint: %w", err)
	}
	if ferr = fn(w); ferr != nil {
		if _, err := w.tx.ExecContext(w.ctx, "ROLLBACK TO "+name); err != nil {
			return ferr, fmt.Errorf("rollback to savepoint: %w", err)
		}
	}
	if _, err := w.tx.ExecContext(w.ctx, "RELEASE "+name); err != nil {
		return ferr, fmt.Errorf("release savepoint: %w", err)
	}
	return ferr, nil
}

// stmt returns prepared statement i bound to the transaction.
func (w *wtx) stmt(i int) *sql.Stmt {
	if w.st[i] == nil {
		w.st[i] = w.tx.StmtContext(w.ctx, w.s.stmts[i])
	}
	return w.st[i]
}

// ts returns the time stamp for the next appended event: the clock, but
// never earlier than the last one this Store assigned.
func (w *wtx) ts() string {
	t := w.s.now().UTC().Truncate(time.Millisecond)
	if t.Before(w.s.lastTS) {
		t = w.s.lastTS
	}
	w.s.lastTS = t
	return ledger.FormatTime(t)
}

func (w *wtx) append(r ledger.Record) (ledger.Result, error) {
	if r.DedupeKey != "" {
		ev, err := scanEvent(w.stmt(stByDedupe).QueryRow(r.DedupeKey))
		if err == nil {
			return ledger.Result{Event: ev, Duplicate: true}, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return ledger.Result{}, fmt.Errorf("dedupe lookup: %w", err)
		}
	}
	ev := ledger.Event{
		V:         ledger.Version,
		ID:        envelope.NewID(),
		TS:        w.ts(),
		Kind:      r.Kind,
		GroupID:   r.GroupID,
		ScopeKey:  r.ScopeKey,
		By:        r.By,
		Data:      r.Data,
		DedupeKey: r.DedupeKey,
	}
	if err := w.stmt(stNextSeq).QueryRow(r.GroupID).Scan(&ev.Seq); err != nil {
		return ledger.Result{}, fmt.Errorf("next seq of %q: %w", r.GroupID, err)
	}
	if err := w.insert(ev); err != nil {
		return ledger.Result{}, err
	}
	return ledger.Result{Event: ev}, nil
}

func (w *wtx) insert(ev ledger.Event) error {
	var dedup any
	if ev.DedupeKey != "" {
		dedup = ev.DedupeKey
	}
	_, err := w.stmt(stInsertEvent).Exec(ev.ID, ev.GroupID, ev.Seq, ev.TS, ev.Kind, ev.ScopeKey, ev.By, string(ev.Data), dedup, ev.V)
	if err != nil {
		return fmt.Errorf("insert event %s: %w", ev.ID, err)
	}
	w.pending = append(w.pending, ev.GroupID)
	return nil
}

// importEvent stores ev as it is, under its own savepoint.
func (w *wtx) importEvent(ev ledger.Event) error {
	ferr, err := w.savepoint("ev", func(w *wtx) error {
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
		var last int64
		if err := w.stmt(stLastSeq).QueryRow(ev.GroupID).Scan(&last); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if ev.Seq != last+1 {
			return fmt.Errorf("%w: seq %d in group %q, want %d", ledger.ErrConflict, ev.Seq, ev.GroupID, last+1)
		}
		if _, err := w.stmt(stSetSeq).Exec(ev.GroupID, ev.Seq); err != nil {
			return err
		}
		return w.insert(ev)
	})
	if err != nil {
		return err
	}
	return ferr
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
