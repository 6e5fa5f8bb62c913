// Package d1kv is a store.Backend kept in SQL tables of Cloudflare D1
// (SQLite), so that the Workers build serves CouchDB databases whose
// data outlives an isolate and is shared by all of them.
//
// The backend reaches the database only through Exec: one SELECT at a
// time (Query) and an atomic batch of writes (Batch), which is what D1's
// binding offers to a Worker (prepare(…).bind(…).all() and batch([…]));
// D1 has no interactive transactions. NewD1 (js builds) adapts the D1
// binding; the tests adapt an SQLite file (modernc.org/sqlite).
//
// Tables (Migrations, or the same as one script in Schema):
//
//	livesync_kv(db TEXT, b INTEGER, k BLOB, v BLOB, PRIMARY KEY(db, b, k)) WITHOUT ROWID
//	livesync_head(db TEXT PRIMARY KEY, version INTEGER NOT NULL) WITHOUT ROWID
//	livesync_databases(name TEXT PRIMARY KEY, created INTEGER NOT NULL) WITHOUT ROWID
//
// Every database's keys live in livesync_kv under its name (db) and the
// store's bucket number (b); keys and values are BLOBs, so SQLite orders
// keys by their bytes as the store expects. livesync_head holds each
// database's commit version.
//
// Consistency. Update runs fn against D1's rows overlaid with fn's own
// writes, which are buffered; when fn returns nil the writes go to D1 in
// one batch, all or nothing. The batch starts by moving the database's
// commit version from the one read when the Update began to the next; if
// another isolate committed in between, that statement fails (NOT NULL),
// D1 rolls the whole batch back, and Update runs fn again on the new
// state (up to MaxAttempts times, then ErrContention). Updates are
// therefore serialisable across isolates, and within one backend they
// also wait for each other (a mutex). A View reads D1 directly, statement
// by statement: each read sees every Update committed before it, but a
// View is not a snapshot. It reads the store's counters (the last
// sequence, the document count) first, in the statement that starts it,
// so the rest it reads is as new as they are or newer: a changes scan
// that finds nothing new never reports a last sequence past a change it
// did not list. A changes page and the documents it names are read in
// one statement; a later page may list a document an Update moved on
// since the earlier page listed it, so a document may appear twice in
// one answer, never not at all.
//
// Reads cost round trips, so the backend is a store.Prefetcher: the keys
// a transaction is about to Get are read in one statement per 98 keys,
// and used only if no commit happened since they were read. A scan of
// the changes sequence reads each page's document records in the same
// statement (a join), so a changes page of 100 costs one query. Writes
// are grouped into multi-row statements of at most 100 bound parameters
// (D1's limit per statement). A replication request of 100 documents
// (_revs_diff, _bulk_docs, _bulk_get, a _changes page) costs 3 queries
// and one batch, plus the check that the database exists.
//
// Limits that apply (D1, as documented by Cloudflare): a value (a
// document's revision tree with its bodies, a chunk, a kept body) of at
// most 2,000,000 bytes; 100 bound parameters and 100 KB of SQL per
// statement; 30 s per statement; 50 queries per Worker invocation on the
// free plan, 1000 on the paid plan; 500 MB per database on the free
// plan, 10 GB on the paid plan.
package d1kv
