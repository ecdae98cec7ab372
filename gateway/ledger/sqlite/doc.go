// Package sqlite is the relay's default ledger.Store: one SQLite file in
// the data dir, through the pure-Go driver modernc.org/sqlite (docs/design.md §6).
//
// # Durability and group commit
//
// The database runs in WAL mode. Every write (appends, imports, cursors,
// claims) goes to one writer goroutine, which runs the queued operations in
// one transaction, each under its own SAVEPOINT, and commits. A second
// goroutine, the syncer, then fsyncs the WAL file and only after that
// answers the callers of that transaction and wakes followers: a write
// that returned is on stable storage. COMMIT itself does not fsync (the
// connection runs with synchronous=NORMAL, under which SQLite still syncs
// around checkpoints and when the WAL is reused); the syncer's fsync is
// what makes each commit durable, and it is the same call SQLite would
// make with synchronous=FULL.
//
// The two goroutines form a pipeline: while the syncer fsyncs one commit,
// the writer already runs the operations that arrive in the next
// transaction, and commits it as soon as that fsync is done. Under many
// concurrent clients one fsync is shared by everything that arrived during
// the previous one, and the disk's flush time does not stop the writer;
// that is where the relay's append throughput comes from
// (BenchmarkAppendGroupCommit and BenchmarkAppendSingle show the
// difference). While callers arrive concurrently, a small transaction
// waits for more operations for up to the last fsync's duration (at most
// 500 µs) before it commits, since a commit costs the CPU of several
// appends; a lone caller never waits. The writer runs its transactions
// with prepared BEGIN IMMEDIATE and COMMIT statements on one connection it
// holds. An operation that fails (an invalid claim, a refused
// import) is rolled back to its savepoint and does not affect the others in
// its transaction; a failed COMMIT fails them all. One-record appends (the
// relay's intake) need no savepoint: the writer gives each its seq, id and
// time stamp as it comes, and inserts them up to 16 in one statement
// (falling back to one at a time when a dedupe key is taken); a failure
// there fails the transaction. A failed fsync fails the
// transaction's callers and every later write with ErrBroken (wrapping
// the fsync's cause): after such a failure the kernel may have dropped the
// data, so the store must be reopened. The operations of a
// failed fsync may still be in the file; retrying an append with its dedupe
// key is safe.
//
// Readers may see a committed transaction up to one fsync before its
// writers are answered. Only a power loss in that window can take it back
// (a crash of the process cannot: the data is in the kernel's cache), and
// then none of its writers was told it was stored.
//
// Reads (Get, Range, Follow, …) use a separate pool of read-only
// connections and never wait for the writer: in WAL mode they see the last
// committed state.
//
// # Several processes
//
// Sequence numbers are assigned inside the write transaction from the
// group's last stored event (and the groups table is brought up to date
// before the transaction commits), and SQLite serializes write
// transactions across connections, so two Stores opened on the same file
// (for example a relay and an offline import) still keep seq dense and
// dedupe keys unique. Follow is woken at once by appends made through the same Store;
// appends by another Store or process are seen within Options.FollowPoll.
//
// # Schema
//
//	events  (id UNIQUE, group_id, seq, ts, kind, scope_key, by_, data, dedupe_key UNIQUE, v)
//	        UNIQUE (group_id, seq)
//	groups  (group_id PRIMARY KEY, last_seq)   written at each commit
//	cursors (group_id, actor PRIMARY KEY, event_id, seq, updated_at)
//	        also the marks (SetMark): group_id "", actor = the name, seq = the log position
//	claims  (group_id, event_id PRIMARY KEY, actor, claimed_at, expires_at)
//
// data holds the event's data packed (schema 3): an S2 block against a
// fixed dictionary, behind a tag byte, as a blob, for data of 96 bytes to
// 64 MiB that packs at least an eighth smaller (an envelope's event, ~1.3
// KB, into ~0.5 KB); other data, and every row a schema 2 writer stored,
// as JSON text. Reads unpack it: callers see the data they appended. A
// packed value that does not unpack fails the read that reaches it, with
// an error naming the event, its group and seq (and, in the log, its
// position); S2 blocks carry no checksum, so damage that still unpacks is
// not detected, as it is not in a row of text.
//
// PRAGMA user_version holds the schema version; Open refuses a newer one,
// and a database without one that holds tables (not a ledger).
package sqlite
