// Package couchdb connects the engine to a CouchDB database (Apache
// CouchDB, or any server that speaks its replication protocol) for
// Self-hosted LiveSync vaults.
//
// New opens a database and returns a *DB, which is
//
//   - an engine.Endpoint for the replicator: Info, Changes (POST
//     _changes?style=all_docs, the selector in the body, longpoll for
//     Wait), RevsDiff, BulkGet (POST _bulk_get?revs=true, falling back to
//     per-document GET ?open_revs when the server lacks _bulk_get),
//     BulkDocs (new_edits=false) and _local documents;
//   - through ChunkSource, an engine.ChunkSource for on-demand chunk
//     retrieval (POST _all_docs?include_docs=true with at most 100 keys,
//     as upstream's ChunkFetcher);
//   - a negotiate.Port (Read, Write of the _local sync parameters and
//     milestone and of the version document, with their _rev), over which
//     Handshake runs the LiveSync pre-sync handshake of engine/negotiate:
//     the vault's PBKDF2 salt, the version document, the milestone
//     verdicts;
//   - through Remote (NewRemote), a vault.Remote, and through Doctor, a
//     read-only diagnosis of the database returning vault findings.
//
// HTTP goes through kivik v4 (github.com/go-kivik/kivik/v4, couchdb
// driver) and, where kivik cannot express a request (a selector in the
// _changes body, _bulk_get with per-row answers, keys in the _all_docs
// body, _bulk_docs with per-document error names), through the same
// *http.Client, so Basic and cookie authentication apply to both.
//
// Documents pass unchanged: the E2EE/obfuscation transform is a decorator
// around the Endpoint (engine/replicate.Transform); the ChunkSource takes a
// *livesync.Codec to decrypt the chunks it returns. Sequences are opaque
// strings. Errors are *engine.Error with StageTransport (network, 5xx;
// retryable), StageAuth (401, 403; permanent) or StageProtocol; a 404
// wraps engine.ErrNotFound and a 413 engine.ErrTooLarge. Error messages
// never contain passwords, salts or document contents.
package couchdb
