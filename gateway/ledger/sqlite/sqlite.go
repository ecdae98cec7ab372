package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"log/slog"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/internal/privfile"
	"github.com/crosstalk-go/crosstalk/internal/sqliterr"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// schemaVersion is stored in PRAGMA user_version. Version 2 is version 1
// without the trigger events_last_seq, which moved groups.last_seq with
// every inserted event: the writer moves it once per group and
// transaction (wtx.flushSeqs), and writers of version 1 that relied on
// the trigger must not open the file, nor still have it open when it is
// migrated (docs/operations.md "Upgrading": their appends would then
// fail on events_group_seq until they are restarted). Version 3 stores
// event data packed (pack.go): its tables are version 2's, but a writer
// of version 2 would read a packed row as data that is not JSON, so it
// must refuse the file, as it does a newer version.
const schemaVersion = 3

const schema = `
CREATE TABLE IF NOT EXISTS events (
	id         TEXT    NOT NULL UNIQUE,
	group_id   TEXT    NOT NULL,
	seq        INTEGER NOT NULL,
	ts         TEXT    NOT NULL,
	kind       TEXT    NOT NULL,
	scope_key  TEXT    NOT NULL,
	by_        TEXT    NOT NULL,
	data       TEXT    NOT NULL,
	dedupe_key TEXT    UNIQUE,
	v          INTEGER NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS events_group_seq ON events (group_id, seq);
CREATE TABLE IF NOT EXISTS groups (
	group_id TEXT    NOT NULL PRIMARY KEY,
	last_seq INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS cursors (
	group_id   TEXT    NOT NULL,
	actor      TEXT    NOT NULL,
	event_id   TEXT    NOT NULL,
	seq        INTEGER NOT NULL,
	updated_at TEXT    NOT NULL,
	PRIMARY KEY (group_id, actor)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS claims (
	group_id   TEXT    NOT NULL,
	event_id   TEXT    NOT NULL,
	actor      TEXT    NOT NULL,
	claimed_at INTEGER NOT NULL, -- Unix nanoseconds
	expires_at INTEGER NOT NULL, -- Unix nanoseconds
	PRIMARY KEY (group_id, event_id)
) WITHOUT ROWID;
`

// eventCols is the column list scanEvent reads.
const eventCols = `id, ts, seq, kind, group_id, scope_key, by_, data, dedupe_key, v`

// Defaults for Options.
const (
	DefaultBusyTimeout = 5 * time.Second
	DefaultMaxBatch    = 1024
	DefaultFollowPoll  = 2 * time.Second
)

// followPage is how many events Follow reads per query.
const followPage = 256

// Options configures Open. The zero value (or nil) means defaults.
type Options struct {
	// Logger receives debug records about commits and errors; nil
	// discards them. Event data is never logged.
	Logger *slog.Logger
	// BusyTimeout is how long a connection waits for a lock held by
	// another connection or process; 0 means DefaultBusyTimeout.
	BusyTimeout time.Duration
	// MaxBatch caps how many queued write operations one transaction
	// takes; 0 means DefaultMaxBatch.
	MaxBatch int
	// ReadConns caps the read-only connection pool; 0 means
	// max(4, GOMAXPROCS).
	ReadConns int
	// Now is the clock that stamps appended events; nil means time.Now.
	// Within one Store, ts never goes backwards even if the clock does.
	Now func() time.Time
	// FollowPoll is how often an idle Follow looks for events without
	// being woken, which catches appends made through another Store or
	// process on the same file; 0 means DefaultFollowPoll.
	FollowPoll time.Duration
}

// Store is a ledger.Store backed by one SQLite file. Create it with Open
// and release it with Close.
type Store struct {
	path     string
	log      *slog.Logger
	now      func() time.Time
	maxBatch int
	poll     time.Duration

	wdb *sql.DB // one connection, used only by the writer goroutine
	// wconn is wdb's connection, held from Open to Close: the writer runs
	// its transactions on it with BEGIN and COMMIT statements of its own
	// (stmts), not a database/sql Tx, which starts a goroutine to watch
	// its context for every transaction and every query in it.
	wconn *sql.Conn
	rdb   *sql.DB // read-only pool
	pin   *sql.Conn
	stmts [numStmts]*sql.Stmt
	// raw holds the statements of rawStmt, prepared on wconn's driver
	// connection instead of stmts (see exec); rawArgs holds their
	// arguments, the writer's.
	raw     [numStmts]driver.StmtExecContext
	rawArgs [10]driver.NamedValue
	rawDest [1]driver.Value                   // queryInt's
	runArgs [10 * appendRun]driver.NamedValue // insertHeld's
	packed  []byte                            // scratch for the data bound (bindEvent), the writer's
	seqArgs [2 * seqRun]driver.NamedValue     // flushSeqs'
	// logAfter is Log's query, prepared on the read pool: the relay's
	// projections read the log after every append.
	logAfter *sql.Stmt

	mu      sync.RWMutex // guards closed against sends on queue
	closed  bool
	queue   chan *op
	toSync  chan committed        // writer → syncer, one commit at a time
	synced  chan struct{}         // syncer → writer: the commit is answered
	wal     *walFile              // syncer only, then Close
	broken  atomic.Pointer[error] // set by a failed fsync: no more writes
	closing chan struct{}         // closed when Close starts
	done    chan struct{}         // closed when the writer and the syncer have exited

	closeOnce sync.Once
	closeErr  error

	notes notifier
	// followReads holds a slot per follower page read in flight: at most
	// half the read connections, so that many open streams never queue
	// the other reads (a health check, a page) behind them.
	followReads chan struct{}
	// tail holds the rows FollowLog's followers read last.
	tail tail

	lastTS     time.Time // writer goroutine only
	lastTSText string    // lastTS formatted (ledger.FormatTime)
	// seqs and flushed are the writer's: groups' last seqs (wtx.seqs)
	// and the groups wtx.flushSeqs has written. seqs holds after the
	// commit of the last transaction (seqsKept) while the database's
	// data_version, which another connection's commit changes, is still
	// dataVersion.
	seqs        map[string]int64
	flushed     map[string]bool
	seqsKept    bool
	dataVersion int64
	// lastSync is how long the last fsync of the WAL took, in
	// nanoseconds: how long the writer lets a small transaction wait for
	// company (lingerFor).
	lastSync atomic.Int64

	commits, ops, events, syncs atomic.Int64
	syncTime                    atomic.Int64 // nanoseconds in the fsyncs counted by syncs
}

// Stats counts the work of a Store's writer since Open.
type Stats struct {
	// Commits is the number of committed write transactions.
	Commits int64
	// Syncs is the number of fsyncs of the WAL: one per commit, but for
	// a commit whose fsync failed or is under way, so Syncs ≤ Commits.
	Syncs int64
	// Ops is the number of write calls (Append, ImportEvents, SetCursor,
	// Claim, ReleaseClaim) those transactions carried. Ops/Commits is the
	// average group-commit batch.
	Ops int64
	// Events is the number of events stored (appended or imported).
	Events int64
	// SyncTime is the time the Syncs took, summed: SyncTime/Syncs is the
	// disk's mean time to make a commit durable. It includes what goes
	// with an fsync now and then: opening the WAL file the first time
	// (and fsyncing its directory), and a check once a second that the
	// file still has its name.
	SyncTime time.Duration
}

// Stats returns the writer's counters.
func (s *Store) Stats() Stats {
	// Each count is loaded before the ones that grow before it (an
	// fsync is counted after its time is added and after its commit is
	// counted, a commit after its operations), so that the snapshot keeps
	// Syncs ≤ Commits ≤ Ops, and no fsync without its time, even while
	// the writer runs.
	var st Stats
	st.Syncs = s.syncs.Load()
	st.SyncTime = time.Duration(s.syncTime.Load())
	st.Commits = s.commits.Load()
	st.Ops = s.ops.Load()
	st.Events = s.events.Load()
	return st
}

var _ ledger.Store = (*Store)(nil)

// Open opens (creating if needed) the ledger database at path, a file
// name. The directory must exist. ctx bounds only the opening itself. A
// file it creates has mode 0600 (its -wal and -shm files too); an
// existing one keeps its mode.
func Open(ctx context.Context, path string, opts *Options) (*Store, error) {
	s, err := open(ctx, path, opts)
	if sqliterr.Damaged(err) {
		err = fmt.Errorf("%w: %w", err, ErrDamaged)
	}
	return s, err
}

// ErrDamaged is wrapped by Open's error when SQLite finds the file is not
// a database or is malformed: a copy cut short, a disk error, garbage
// over it. The error says what to do.
var ErrDamaged = errors.New(`the ledger file is damaged; restore it from a backup (docs/operations.md "Backup and restore")`)

// newerHint says what to do about a ledger of a newer schema.
const newerHint = `run the newer crosstalk, or restore the backup taken before the upgrade (docs/operations.md "Upgrading")`

// open is Open.
func open(ctx context.Context, path string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = DefaultBusyTimeout
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.ReadConns <= 0 {
		o.ReadConns = max(4, runtime.GOMAXPROCS(0))
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.FollowPoll <= 0 {
		o.FollowPoll = DefaultFollowPoll
	}
	if path == "" || strings.HasPrefix(path, ":memory:") || strings.HasPrefix(path, "file:") {
		return nil, fmt.Errorf("sqlite: open %q: want a file name", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %q: %w", path, err)
	}
	// A write-ahead log without its database is what is left of a ledger
	// moved or deleted without it (a restore half done): SQLite would
	// replay it into the new empty file and the relay would start on
	// that, with none of the ledger's events, consuming the log.
	if _, err := os.Lstat(abs); errors.Is(err, fs.ErrNotExist) {
		if fi, err := os.Stat(abs + "-wal"); err == nil && fi.Size() > 0 {
			return nil, fmt.Errorf("sqlite: open %s: the file is missing but its write-ahead log %s-wal (%d bytes) is there: put the ledger back beside it (or restore a backup, docs/operations.md \"Backup and restore\"), or remove %s-wal and %s-shm to start a new, empty ledger", abs, abs, fi.Size(), abs, abs)
		}
	}
	// 0600 when new, -wal and -shm alike: the ledger holds every message.
	if err := privfile.Create(abs); err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", abs, err)
	}
	// SQLite says only "unable to open database file" of a directory or
	// a file it may not read and write; the system's error says which.
	if f, err := os.OpenFile(abs, os.O_RDWR, 0); err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", abs, err)
	} else {
		f.Close()
	}

	busy := fmt.Sprintf("_pragma=busy_timeout(%d)", o.BusyTimeout.Milliseconds())
	wdb, err := sql.Open("sqlite", dsn(abs, busy, "_pragma=journal_mode(WAL)", "_pragma=synchronous(NORMAL)", "_pragma=temp_store(MEMORY)", "_txlock=immediate"))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", abs, err)
	}
	wdb.SetMaxOpenConns(1)
	wdb.SetMaxIdleConns(1)
	wdb.SetConnMaxLifetime(0)
	wdb.SetConnMaxIdleTime(0)

	s := &Store{
		path:     abs,
		log:      o.Logger,
		now:      o.Now,
		maxBatch: o.MaxBatch,
		poll:     o.FollowPoll,
		wdb:      wdb,
		queue:    make(chan *op, o.MaxBatch),
		toSync:   make(chan committed),
		synced:   make(chan struct{}, 1),
		wal:      newWALFile(abs),
		closing:  make(chan struct{}),
		done:     make(chan struct{}),
		seqs:     make(map[string]int64),
		flushed:  make(map[string]bool),
	}
	s.notes.init()
	if err := s.migrate(ctx); err != nil {
		wdb.Close()
		return nil, err
	}
	// The schema, if migrate wrote it. No WAL file: nothing was written.
	if err := s.wal.sync(); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.wal.close()
		wdb.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", abs, err)
	}
	rdb, err := sql.Open("sqlite", dsn(abs, busy, "_pragma=query_only(1)"))
	if err != nil {
		wdb.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", abs, err)
	}
	rdb.SetMaxOpenConns(o.ReadConns + 1) // + the pinned one
	rdb.SetMaxIdleConns(o.ReadConns)
	s.rdb = rdb
	s.followReads = make(chan struct{}, max(1, o.ReadConns/2))
	// A connection held open for the Store's life keeps SQLite from
	// deleting the WAL file the syncer fsyncs (see walFile).
	if s.pin, err = rdb.Conn(ctx); err == nil {
		var v int
		err = s.pin.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v)
	}
	if err != nil {
		s.closeDBs()
		return nil, fmt.Errorf("sqlite: open %s: %w", abs, err)
	}
	if s.wconn, err = wdb.Conn(ctx); err != nil {
		s.closeDBs()
		return nil, fmt.Errorf("sqlite: open %s: %w", abs, err)
	}
	for i, q := range stmtText {
		var err error
		if rawStmt(i) {
			err = s.prepareRaw(ctx, i)
		} else {
			s.stmts[i], err = s.wconn.PrepareContext(ctx, q)
		}
		if err != nil {
			s.closeDBs()
			return nil, fmt.Errorf("sqlite: open %s: prepare %q: %w", abs, q, err)
		}
	}
	if s.logAfter, err = rdb.PrepareContext(ctx, `SELECT rowid, `+eventCols+` FROM events WHERE rowid > ? ORDER BY rowid LIMIT ?`); err != nil {
		s.closeDBs()
		return nil, fmt.Errorf("sqlite: open %s: prepare the log: %w", abs, err)
	}
	go s.writer()
	go s.syncer()
	s.log.Debug("sqlite: opened ledger", "path", abs)
	return s, nil
}

// dsn makes a driver name for the file at abs with the given parameters.
func dsn(abs string, params ...string) string {
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs), RawQuery: strings.Join(params, "&")}
	return u.String()
}

func (s *Store) migrate(ctx context.Context) error {
	var mode string
	if err := s.wdb.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("sqlite: open %s: %w", s.path, err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("sqlite: open %s: journal mode is %q, not wal", s.path, mode)
	}
	var version int
	if err := s.wdb.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return fmt.Errorf("sqlite: open %s: %w", s.path, err)
	}
	if version > schemaVersion {
		return fmt.Errorf("sqlite: open %s: schema version %d is newer than this program's %d: %s", s.path, version, schemaVersion, newerHint)
	}
	if version == schemaVersion {
		return nil
	}
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: open %s: %w", s.path, err)
	}
	defer tx.Rollback()
	// Read again under the write lock: another process may have created
	// the schema since. A database without a version but with tables is
	// not a ledger (every ledger schema had one): another SQLite file, the
	// projections say, put in the ledger's place. Writing the schema into
	// it would turn it into an empty ledger silently.
	var objects int
	if err := tx.QueryRowContext(ctx, "SELECT (SELECT user_version FROM pragma_user_version), (SELECT count(*) FROM sqlite_master)").Scan(&version, &objects); err != nil {
		return fmt.Errorf("sqlite: open %s: %w", s.path, err)
	}
	switch {
	case version == schemaVersion:
		return nil
	case version == 0 && objects > 0:
		return fmt.Errorf("sqlite: open %s: not a crosstalk ledger (a SQLite database without the ledger's schema version, holding %d tables or indexes of its own)", s.path, objects)
	}
	// Version 1 → 2: the trigger goes (its groups rows are right: the
	// trigger, or before it the writer, kept them so). A new file gets the
	// schema.
	if _, err := tx.ExecContext(ctx, schema+";DROP TRIGGER IF EXISTS events_last_seq"); err != nil {
		return fmt.Errorf("sqlite: open %s: create schema: %w", s.path, err)
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", schemaVersion)); err != nil {
		return fmt.Errorf("sqlite: open %s: %w", s.path, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite: open %s: create schema: %w", s.path, err)
	}
	return nil
}

// Path returns the absolute name of the database file.
func (s *Store) Path() string { return s.path }

// Close waits for the queued writes to commit, then closes the database.
// Calls after the first return the first call's result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		close(s.closing)
		s.mu.Unlock()
		close(s.queue) // no sender holds s.mu now, and none will send again
		<-s.done
		s.closeErr = s.closeDBs()
		s.log.Debug("sqlite: closed ledger", "path", s.path)
	})
	return s.closeErr
}

func (s *Store) closeDBs() error {
	var errs []error
	for _, st := range s.stmts {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	errs = append(errs, s.closeRaw())
	if s.logAfter != nil {
		errs = append(errs, s.logAfter.Close())
	}
	if s.wconn != nil {
		errs = append(errs, s.wconn.Close())
	}
	errs = append(errs, s.wdb.Close(), s.wal.close())
	if s.pin != nil {
		errs = append(errs, s.pin.Close())
	}
	if s.rdb != nil {
		errs = append(errs, s.rdb.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sqlite: close %s: %w", s.path, err)
	}
	return nil
}

func (s *Store) isClosed() bool {
	select {
	case <-s.closing:
		return true
	default:
		return false
	}
}

// readErr turns an error of the read pool into the package's form.
func (s *Store) readErr(what string, err error) error {
	if s.isClosed() {
		return fmt.Errorf("sqlite: %s: %w", what, ledger.ErrClosed)
	}
	return fmt.Errorf("sqlite: %s: %w", what, err)
}

// Append implements ledger.Store.
func (s *Store) Append(ctx context.Context, recs []ledger.Record) ([]ledger.Result, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	if len(recs) == 1 {
		// The relay's intake: no closure, slices or op to allocate
		// (appendOne), and no statement of its own (batch.hold).
		r, err := recs[0].Normalized()
		if err != nil {
			return nil, fmt.Errorf("sqlite: append record 0: %w", err)
		}
		res, err := s.appendOne(ctx, r)
		if err != nil {
			return nil, fmt.Errorf("sqlite: append: %w", err)
		}
		return []ledger.Result{res}, nil
	}
	norm := make([]ledger.Record, len(recs))
	for i, r := range recs {
		var err error
		if norm[i], err = r.Normalized(); err != nil {
			return nil, fmt.Errorf("sqlite: append record %d: %w", i, err)
		}
	}
	res := make([]ledger.Result, len(norm))
	fn := func(w *wtx) error {
		for i, r := range norm {
			var err error
			if res[i], err = w.append(r); err != nil {
				return err
			}
		}
		return nil
	}
	err := s.submit(ctx, fn)
	if err != nil {
		return nil, fmt.Errorf("sqlite: append: %w", err)
	}
	return res, nil
}

// ImportEvents implements ledger.Store.
func (s *Store) ImportEvents(ctx context.Context, evs []ledger.Event) (int, error) {
	norm := make([]ledger.Event, 0, len(evs))
	var verr error
	for _, ev := range evs {
		ev, err := ev.Normalized()
		if err != nil {
			verr = err
			break
		}
		norm = append(norm, ev)
	}
	n := 0
	if len(norm) > 0 {
		var ierr error
		err := s.submit(ctx, func(w *wtx) (err error) {
			// Each event is kept as it succeeds: the refusal of one
			// does not undo the ones before it.
			n, ierr, err = w.importEvents(norm)
			if err != nil {
				n = 0 // the transaction is undone
			}
			return err
		})
		if err != nil {
			return 0, fmt.Errorf("sqlite: import: %w", err)
		}
		if ierr != nil {
			return n, fmt.Errorf("sqlite: import event %s: %w", norm[n].ID, ierr)
		}
	}
	if verr != nil {
		return n, fmt.Errorf("sqlite: import: %w", verr)
	}
	return n, nil
}

// Get implements ledger.Store.
func (s *Store) Get(ctx context.Context, id string) (ledger.Event, error) {
	return s.getOne(ctx, "get "+id, `SELECT `+eventCols+` FROM events WHERE id = ?`, id)
}

// GetByDedupeKey implements ledger.Store.
func (s *Store) GetByDedupeKey(ctx context.Context, key string) (ledger.Event, error) {
	if key == "" {
		return ledger.Event{}, fmt.Errorf("sqlite: get by dedupe key: empty key: %w", ledger.ErrNotFound)
	}
	return s.getOne(ctx, fmt.Sprintf("get by dedupe key %q", key), `SELECT `+eventCols+` FROM events WHERE dedupe_key = ?`, key)
}

func (s *Store) getOne(ctx context.Context, what, q string, arg any) (ledger.Event, error) {
	if s.isClosed() {
		return ledger.Event{}, fmt.Errorf("sqlite: %s: %w", what, ledger.ErrClosed)
	}
	ev, err := scanEvent(s.rdb.QueryRowContext(ctx, q, arg))
	if errors.Is(err, sql.ErrNoRows) {
		return ledger.Event{}, fmt.Errorf("sqlite: %s: %w", what, ledger.ErrNotFound)
	}
	if err != nil {
		return ledger.Event{}, s.readErr(what, err)
	}
	return ev, nil
}

// Range implements ledger.Store.
func (s *Store) Range(ctx context.Context, group string, sinceSeq int64, kinds []string, limit int) ([]ledger.Event, error) {
	what := fmt.Sprintf("range %q", group)
	if s.isClosed() {
		return nil, fmt.Errorf("sqlite: %s: %w", what, ledger.ErrClosed)
	}
	var q strings.Builder
	args := []any{group, sinceSeq}
	q.WriteString(`SELECT ` + eventCols + ` FROM events WHERE group_id = ? AND seq > ?`)
	if len(kinds) > 0 {
		q.WriteString(` AND kind IN (?` + strings.Repeat(`, ?`, len(kinds)-1) + `)`)
		for _, k := range kinds {
			args = append(args, k)
		}
	}
	q.WriteString(` ORDER BY seq`)
	if limit > 0 {
		q.WriteString(` LIMIT ?`)
		args = append(args, limit)
	}
	rows, err := s.rdb.QueryContext(ctx, q.String(), args...)
	if err != nil {
		return nil, s.readErr(what, err)
	}
	defer rows.Close()
	var evs []ledger.Event
	for rows.Next() {
		ev, err := scanEvent(rows)
		if err != nil {
			return nil, s.readErr(what, err)
		}
		evs = append(evs, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, s.readErr(what, err)
	}
	return evs, nil
}

// Groups implements ledger.Store.
func (s *Store) Groups(ctx context.Context) ([]ledger.Group, error) {
	if s.isClosed() {
		return nil, fmt.Errorf("sqlite: groups: %w", ledger.ErrClosed)
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT group_id, last_seq FROM groups ORDER BY group_id`)
	if err != nil {
		return nil, s.readErr("groups", err)
	}
	defer rows.Close()
	var gs []ledger.Group
	for rows.Next() {
		var g ledger.Group
		if err := rows.Scan(&g.ID, &g.LastSeq); err != nil {
			return nil, s.readErr("groups", err)
		}
		gs = append(gs, g)
	}
	if err := rows.Err(); err != nil {
		return nil, s.readErr("groups", err)
	}
	return gs, nil
}

// Follow implements ledger.Store. It reads the store in pages by seq and,
// when it has caught up, waits for the writer to signal a commit to the
// group (or Options.FollowPoll passes); the signal is taken before each
// read, so a commit between the read and the wait is not missed.
func (s *Store) Follow(ctx context.Context, group string, sinceSeq int64) iter.Seq2[ledger.Event, error] {
	what := fmt.Sprintf("sqlite: follow %q", group)
	read := func(after int64) ([]ledger.Event, error) {
		evs, err := followRead(ctx, s, func() ([]ledger.Event, error) { return s.Range(ctx, group, after, nil, followPage) })
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		return evs, nil
	}
	return ledger.Pages(ctx, sinceSeq, followPage, read, func(ev ledger.Event) int64 { return ev.Seq }, func() (func() error, error) {
		return s.waiter(ctx, s.notes.wait(group), what), nil
	})
}

// logWake is the notifier key of appends to any group (group ids are
// never empty).
const logWake = ""

// Log implements ledger.Store. An event's position is its rowid: the
// single writer inserts in commit order and never deletes, so rowids
// only grow. (VACUUM may renumber rowids of a table without an INTEGER
// PRIMARY KEY; the store never runs it, and neither should an operator.)
func (s *Store) Log(ctx context.Context, after int64, limit int) ([]ledger.Logged, error) {
	return s.logRows(ctx, "log", "", after, limit)
}

// LogBefore implements ledger.Store: a descending walk of the rowid.
func (s *Store) LogBefore(ctx context.Context, before int64, limit int) ([]ledger.Logged, error) {
	if before <= 0 {
		before = math.MaxInt64
	}
	return s.logRows(ctx, "log before", `WHERE rowid < ? ORDER BY rowid DESC`, before, limit)
}

// logRows reads at most limit events with their rowids, selected and
// ordered by where (one ? for pos); where "" is Log's prepared query.
func (s *Store) logRows(ctx context.Context, what, where string, pos int64, limit int) ([]ledger.Logged, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("sqlite: %s: %w: limit %d is not positive", what, ledger.ErrInvalid, limit)
	}
	if s.isClosed() {
		return nil, fmt.Errorf("sqlite: %s: %w", what, ledger.ErrClosed)
	}
	var rows *sql.Rows
	var err error
	if where == "" {
		rows, err = s.logAfter.QueryContext(ctx, pos, limit)
	} else {
		rows, err = s.rdb.QueryContext(ctx, `SELECT rowid, `+eventCols+` FROM events `+where+` LIMIT ?`, pos, limit)
	}
	if err != nil {
		return nil, s.readErr(what, err)
	}
	defer rows.Close()
	var out []ledger.Logged
	for rows.Next() {
		var l ledger.Logged
		ev, err := scanEvent(rowidScanner{rows, &l.Pos})
		if errors.Is(err, errDamagedData) { // the row was read: l.Pos is its position
			err = fmt.Errorf("position %d: %w", l.Pos, err)
		}
		if err != nil {
			return nil, s.readErr(what, err)
		}
		l.Event = ev
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, s.readErr(what, err)
	}
	return out, nil
}

// rowidScanner scans a leading rowid column into pos, the rest as
// scanEvent asks.
type rowidScanner struct {
	r   scanner
	pos *int64
}

func (r rowidScanner) Scan(dest ...any) error { return r.r.Scan(append([]any{r.pos}, dest...)...) }

// FollowLog implements ledger.Store like Follow, woken by a commit to
// any group. Its followers share the rows they read last (tail).
func (s *Store) FollowLog(ctx context.Context, after int64) iter.Seq2[ledger.Logged, error] {
	read := func(after int64) ([]ledger.Logged, error) {
		page, err := s.followLogPage(ctx, after)
		if err != nil {
			return nil, fmt.Errorf("sqlite: follow log: %w", err)
		}
		return page, nil
	}
	return ledger.Pages(ctx, after, followPage, read, func(l ledger.Logged) int64 { return l.Pos }, func() (func() error, error) {
		return s.waiter(ctx, s.notes.wait(logWake), "sqlite: follow log"), nil
	})
}

// followRead runs a follower's page read in one of s.followReads.
func followRead[T any](ctx context.Context, s *Store, read func() ([]T, error)) ([]T, error) {
	select {
	case s.followReads <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.closing:
		return nil, fmt.Errorf("sqlite: follow: %w", ledger.ErrClosed)
	}
	defer func() { <-s.followReads }()
	return read()
}

// waiter returns the wait of ledger.Pages on wake: nil when it fires or
// the poll interval passes (another process may have appended),
// ctx.Err(), or ErrClosed once the store is closing.
func (s *Store) waiter(ctx context.Context, wake *wakeup, what string) func() error {
	return func() error {
		t := time.NewTimer(s.poll)
		defer t.Stop()
		s.notes.enter(wake)
		defer s.notes.leave(wake)
		select {
		case <-wake.ch:
			return nil
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-s.closing:
			return fmt.Errorf("%s: %w", what, ledger.ErrClosed)
		}
	}
}

// SetCursor implements ledger.Store.
func (s *Store) SetCursor(ctx context.Context, group, actor, eventID string) (ledger.Cursor, error) {
	return s.moveCursor(ctx, "set cursor", stUpsertCursor, group, actor, eventID)
}

// AdvanceCursor implements ledger.Store: one conditional upsert in the
// writer's transaction, which holds SQLite's write lock, so another Store
// on the same file cannot write in between.
func (s *Store) AdvanceCursor(ctx context.Context, group, actor, eventID string) (ledger.Cursor, error) {
	return s.moveCursor(ctx, "advance cursor", stAdvanceCursor, group, actor, eventID)
}

// moveCursor writes the cursor with the upsert st (stUpsertCursor, or
// stAdvanceCursor, which leaves a cursor at or past the event) and
// returns the cursor as it then stands.
func (s *Store) moveCursor(ctx context.Context, what string, st int, group, actor, eventID string) (ledger.Cursor, error) {
	if group == "" || actor == "" || eventID == "" {
		return ledger.Cursor{}, fmt.Errorf("sqlite: %s: %w: empty group, actor or event id", what, ledger.ErrInvalid)
	}
	c := ledger.Cursor{GroupID: group, Actor: actor}
	err := s.submit(ctx, func(w *wtx) error {
		seq, err := w.eventSeq(group, eventID)
		if err != nil {
			return err
		}
		if _, err := w.stmt(st).Exec(group, actor, eventID, seq, ledger.FormatTime(w.s.now())); err != nil {
			return err
		}
		return w.stmt(stGetCursor).QueryRow(group, actor).Scan(&c.EventID, &c.Seq)
	})
	if err != nil {
		return ledger.Cursor{}, fmt.Errorf("sqlite: %s %q/%q: %w", what, group, actor, err)
	}
	return c, nil
}

// GetCursor implements ledger.Store.
func (s *Store) GetCursor(ctx context.Context, group, actor string) (ledger.Cursor, error) {
	what := fmt.Sprintf("get cursor %q/%q", group, actor)
	if s.isClosed() {
		return ledger.Cursor{}, fmt.Errorf("sqlite: %s: %w", what, ledger.ErrClosed)
	}
	c := ledger.Cursor{GroupID: group, Actor: actor}
	err := s.rdb.QueryRowContext(ctx, `SELECT event_id, seq FROM cursors WHERE group_id = ? AND actor = ?`, group, actor).Scan(&c.EventID, &c.Seq)
	if errors.Is(err, sql.ErrNoRows) {
		return ledger.Cursor{}, fmt.Errorf("sqlite: %s: %w", what, ledger.ErrNotFound)
	}
	if err != nil {
		return ledger.Cursor{}, s.readErr(what, err)
	}
	return c, nil
}

// cursorsOfQuery is CursorsOf's query. CROSS JOIN keeps the groups table
// outside: SQLite does not reorder it.
const cursorsOfQuery = `SELECT c.group_id, c.event_id, c.seq FROM groups g CROSS JOIN cursors c ON c.group_id = g.group_id AND c.actor = ?`

// CursorsOf implements ledger.CursorLister with one query: a lookup of
// the cursors table's key (group_id, actor) for each row of the groups
// table, which is what Groups lists. Without an index led by the actor,
// WHERE actor = ? alone would scan every cursor: at 300 groups and 50
// agents (30,000 read and delivery cursors) that took ~6 ms, against
// ~1 ms for the lookups and ~8 ms for 300 GetCursor calls.
func (s *Store) CursorsOf(ctx context.Context, actor string) (map[string]ledger.Cursor, error) {
	what := fmt.Sprintf("cursors of %q", actor)
	if s.isClosed() {
		return nil, fmt.Errorf("sqlite: %s: %w", what, ledger.ErrClosed)
	}
	rows, err := s.rdb.QueryContext(ctx, cursorsOfQuery, actor)
	if err != nil {
		return nil, s.readErr(what, err)
	}
	defer rows.Close()
	out := map[string]ledger.Cursor{}
	for rows.Next() {
		c := ledger.Cursor{Actor: actor}
		if err := rows.Scan(&c.GroupID, &c.EventID, &c.Seq); err != nil {
			return nil, s.readErr(what, err)
		}
		out[c.GroupID] = c
	}
	if err := rows.Err(); err != nil {
		return nil, s.readErr(what, err)
	}
	return out, nil
}

// SetMark implements ledger.Store. Marks are rows of the cursors table
// under the group id "", which no group has (a record needs one): the
// schema stays as it was, so a ledger file written with marks still
// opens in a relay that does not know them, and one without them is a
// ledger without marks. The row's seq holds the log position.
func (s *Store) SetMark(ctx context.Context, name string, m ledger.Mark) error {
	if name == "" || m.Pos < 0 {
		return fmt.Errorf("sqlite: set mark %q: %w: empty name or negative position %d", name, ledger.ErrInvalid, m.Pos)
	}
	err := s.submit(ctx, func(w *wtx) error {
		_, err := w.stmt(stUpsertCursor).Exec(markGroup, name, m.EventID, m.Pos, ledger.FormatTime(w.s.now()))
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: set mark %q: %w", name, err)
	}
	return nil
}

// GetMark implements ledger.Store.
func (s *Store) GetMark(ctx context.Context, name string) (ledger.Mark, error) {
	what := fmt.Sprintf("get mark %q", name)
	if s.isClosed() {
		return ledger.Mark{}, fmt.Errorf("sqlite: %s: %w", what, ledger.ErrClosed)
	}
	var m ledger.Mark
	err := s.rdb.QueryRowContext(ctx, `SELECT event_id, seq FROM cursors WHERE group_id = ? AND actor = ?`, markGroup, name).Scan(&m.EventID, &m.Pos)
	if errors.Is(err, sql.ErrNoRows) {
		return ledger.Mark{}, fmt.Errorf("sqlite: %s: %w", what, ledger.ErrNotFound)
	}
	if err != nil {
		return ledger.Mark{}, s.readErr(what, err)
	}
	return m, nil
}

// markGroup is the cursors table's group id of marks (SetMark).
const markGroup = ""

// Claim implements ledger.Store.
func (s *Store) Claim(ctx context.Context, group, eventID, actor string, ttl time.Duration, now time.Time) (ledger.Claim, error) {
	if group == "" || actor == "" || eventID == "" {
		return ledger.Claim{}, fmt.Errorf("sqlite: claim: %w: empty group, actor or event id", ledger.ErrInvalid)
	}
	if ttl <= 0 || now.IsZero() {
		return ledger.Claim{}, fmt.Errorf("sqlite: claim: %w: ttl %v at %v", ledger.ErrInvalid, ttl, now)
	}
	var c ledger.Claim
	var claimed bool
	err := s.submit(ctx, func(w *wtx) error {
		if _, err := w.eventSeq(group, eventID); err != nil {
			return err
		}
		cur, ok, err := w.claim(group, eventID)
		if err != nil {
			return err
		}
		if ok && cur.Actor != actor && !cur.Expired(now) {
			c, claimed = cur, true
			return nil
		}
		c = ledger.Claim{GroupID: group, EventID: eventID, Actor: actor, ClaimedAt: now, ExpiresAt: now.Add(ttl)}
		if ok && cur.Actor == actor && !cur.Expired(now) {
			c.ClaimedAt = cur.ClaimedAt // a renewal
		}
		_, err = w.stmt(stUpsertClaim).Exec(group, eventID, actor, c.ClaimedAt.UnixNano(), c.ExpiresAt.UnixNano())
		return err
	})
	if err != nil {
		return ledger.Claim{}, fmt.Errorf("sqlite: claim %s: %w", eventID, err)
	}
	c.ClaimedAt, c.ExpiresAt = c.ClaimedAt.UTC(), c.ExpiresAt.UTC()
	if claimed {
		return c, fmt.Errorf("sqlite: claim %s: held by %q until %s: %w", eventID, c.Actor, c.ExpiresAt.Format(time.RFC3339), ledger.ErrClaimed)
	}
	return c, nil
}

// ReleaseClaim implements ledger.Store.
func (s *Store) ReleaseClaim(ctx context.Context, group, eventID, actor string) error {
	err := s.submit(ctx, func(w *wtx) error {
		cur, ok, err := w.claim(group, eventID)
		switch {
		case err != nil:
			return err
		case !ok:
			return ledger.ErrNotFound
		case cur.Actor != actor:
			return fmt.Errorf("held by %q: %w", cur.Actor, ledger.ErrClaimed)
		}
		_, err = w.stmt(stDeleteClaim).Exec(group, eventID)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: release claim %s: %w", eventID, err)
	}
	return nil
}

// ReleaseClaimAsRead implements ledger.Store.
func (s *Store) ReleaseClaimAsRead(ctx context.Context, c ledger.Claim) error {
	err := s.submit(ctx, func(w *wtx) error {
		cur, ok, err := w.claim(c.GroupID, c.EventID)
		switch {
		case err != nil:
			return err
		case !ok:
			return ledger.ErrNotFound
		case cur.Actor != c.Actor || cur.ExpiresAt.UnixNano() != c.ExpiresAt.UnixNano():
			return fmt.Errorf("held by %q until %s: %w", cur.Actor, cur.ExpiresAt.Format(time.RFC3339Nano), ledger.ErrClaimed)
		}
		_, err = w.stmt(stDeleteClaim).Exec(c.GroupID, c.EventID)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: release claim %s: %w", c.EventID, err)
	}
	return nil
}

// GetClaim implements ledger.Store.
func (s *Store) GetClaim(ctx context.Context, group, eventID string, now time.Time) (ledger.Claim, error) {
	what := fmt.Sprintf("get claim %s", eventID)
	if s.isClosed() {
		return ledger.Claim{}, fmt.Errorf("sqlite: %s: %w", what, ledger.ErrClosed)
	}
	c, err := scanClaim(s.rdb.QueryRowContext(ctx, `SELECT actor, claimed_at, expires_at FROM claims WHERE group_id = ? AND event_id = ?`, group, eventID), group, eventID)
	if errors.Is(err, sql.ErrNoRows) || err == nil && c.Expired(now) {
		return ledger.Claim{}, fmt.Errorf("sqlite: %s: %w", what, ledger.ErrNotFound)
	}
	if err != nil {
		return ledger.Claim{}, s.readErr(what, err)
	}
	return c, nil
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface {
	Scan(dest ...any) error
}

func scanEvent(r scanner) (ledger.Event, error) {
	var (
		ev    ledger.Event
		data  []byte
		dedup sql.NullString
	)
	err := r.Scan(&ev.ID, &ev.TS, &ev.Seq, &ev.Kind, &ev.GroupID, &ev.ScopeKey, &ev.By, &data, &dedup, &ev.V)
	if err != nil {
		return ledger.Event{}, err
	}
	if ev.Data, err = unpack(data); err != nil {
		return ledger.Event{}, fmt.Errorf("event %s (group %q, seq %d): %w", ev.ID, ev.GroupID, ev.Seq, err)
	}
	ev.DedupeKey = dedup.String
	return ev, nil
}

func scanClaim(r scanner, group, eventID string) (ledger.Claim, error) {
	var (
		c         = ledger.Claim{GroupID: group, EventID: eventID}
		at, until int64
	)
	if err := r.Scan(&c.Actor, &at, &until); err != nil {
		return ledger.Claim{}, err
	}
	c.ClaimedAt, c.ExpiresAt = time.Unix(0, at).UTC(), time.Unix(0, until).UTC()
	return c, nil
}

// notifier wakes followers of a group after a commit. wait returns a
// channel that notify closes; each notify replaces the channel, so it
// never blocks and a waiter can never miss the commit after its wait.
//
// A group is held until its next commit; followers of groups that are
// never appended to (a stream opened on a made-up group and abandoned)
// would leave their group behind for ever, so once the notifier holds
// pruneAt groups, the groups nobody waits on are notified (a spurious
// wake: a follower between its read and its wait reads again) and
// dropped.
type notifier struct {
	mu      sync.Mutex
	chans   map[string]*wakeup
	pruneAt int
}

// wakeup is one group's channel and the count of followers waiting on it.
type wakeup struct {
	ch      chan struct{}
	waiting int
}

// minNotifierPrune is the least number of groups the notifier holds
// before it prunes.
const minNotifierPrune = 1024

func (n *notifier) init() { n.chans, n.pruneAt = make(map[string]*wakeup), minNotifierPrune }

// wait returns the group's current wakeup: its channel is closed by the
// group's next commit; a follower waits on it between enter and leave.
func (n *notifier) wait(group string) *wakeup {
	n.mu.Lock()
	defer n.mu.Unlock()
	w, ok := n.chans[group]
	if !ok {
		if len(n.chans) >= n.pruneAt {
			n.pruneLocked()
		}
		w = &wakeup{ch: make(chan struct{})}
		n.chans[group] = w
	}
	return w
}

// pruneLocked notifies and drops every group nobody waits on, and sets
// the next prune at twice the groups left, so that pruning costs a
// constant per group added.
func (n *notifier) pruneLocked() {
	for g, w := range n.chans {
		if w.waiting == 0 {
			close(w.ch)
			delete(n.chans, g)
		}
	}
	n.pruneAt = max(minNotifierPrune, 2*len(n.chans))
}

func (n *notifier) enter(w *wakeup) {
	n.mu.Lock()
	w.waiting++
	n.mu.Unlock()
}

func (n *notifier) leave(w *wakeup) {
	n.mu.Lock()
	w.waiting--
	n.mu.Unlock()
}

func (n *notifier) notify(group string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if w, ok := n.chans[group]; ok {
		close(w.ch)
		delete(n.chans, group)
	}
}
