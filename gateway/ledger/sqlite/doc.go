// Package sqlite is the relay's default ledger.Store: one SQLite file in
// the data dir, through the pure-Go driver modernc.org/sqlite (DESIGN §6).
//
// # Durability and group commit
//
// The database runs in WAL mode with synchronous=FULL, so a committed
// transaction is fsynced before COMMIT returns. Every write (appends,
// imports, cursors, claims) goes to one writer goroutine. It takes whatever
// is queued (up to Options.MaxBatch operations), runs it in a single
// transaction with one SAVEPOINT per operation, commits once (one fsync),
// and only then answers every waiting caller. Under many concurrent
// clients one fsync is shared by the whole queue, which is where the
// relay's append throughput comes from; BenchmarkAppendGroupCommit and
// BenchmarkAppendSingle show the difference. An operation that fails (an
// invalid claim, a refused import) is rolled back to its savepoint and does
// not affect the others in the batch; a failed COMMIT fails them all.
//
// Reads (Get, Range, Follow, …) use a separate pool of read-only
// connections and never wait for the writer: in WAL mode they see the last
// committed state.
//
// # Several processes
//
// Sequence numbers are assigned inside the write transaction from the
// groups table, and SQLite serializes write transactions across
// connections, so two Stores opened on the same file (for example a
// relay and an offline import) still keep seq dense and dedupe keys
// unique. Follow is woken at once by appends made through the same Store;
// appends by another Store or process are seen within Options.FollowPoll.
//
// # Schema
//
//	events  (id UNIQUE, group_id, seq, ts, kind, scope_key, by_, data, dedupe_key UNIQUE, v)
//	        UNIQUE (group_id, seq)
//	groups  (group_id PRIMARY KEY, last_seq)
//	cursors (group_id, actor PRIMARY KEY, event_id, seq, updated_at)
//	claims  (group_id, event_id PRIMARY KEY, actor, claimed_at, expires_at)
//
// PRAGMA user_version holds the schema version; Open refuses a newer one.
package sqlite
