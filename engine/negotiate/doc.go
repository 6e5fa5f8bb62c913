// Package negotiate implements the documents a LiveSync client reads and
// writes before it syncs with a remote, the verdicts it draws from them,
// and the handshake that runs over them, byte-compatible with the
// Self-hosted LiveSync plugin (commonlib src/pouchdb/negotiation.ts,
// src/replication/couchdb/LiveSyncReplicator.ts,
// src/replication/journal/LiveSyncJournalReplicator.ts; upstream
// behaviour, quirks included, is the specification).
//
// The documents:
//
//   - VersionDoc, the replicated "obsydian_livesync_version" document
//     (CouchDB only), judged by CheckVersion.
//   - SyncParameters, which carries the vault's PBKDF2 salt: the _local
//     document on CouchDB, an unencrypted object on object storage.
//     NeedsNewSalt says when a salt may be created (only when the document
//     is proven absent or its salt is empty, never after a failed read);
//     JournalEpoch derives the bucket-lifetime identity from it.
//   - Milestone, the registry of nodes, locks, chunk-format ranges and
//     tweak values (TweakValues) per node and PREFERRED.
//
// The parsers and verdicts do no I/O: every decision is a function of the
// documents and the current time. The handshake reaches a remote through
// a Port (Read and conditional Write of the three records with a version
// token, CouchDB's _rev or an S3 ETag): Handshake runs the whole pre-sync
// check (the salt, the version document, the milestone registration and
// verdict), UpdateMilestone is the one read-change-write loop on the
// milestone (a lost race is redone from a fresh read, MilestoneTries
// rounds), and Lock, Unlock and Join change the milestone's lock as the
// plugin's rebuild and fetch do. The adapters implement Port
// (couchdb.DB, minio.Bucket.Negotiate).
//
// Milestone.Lock, Milestone.Unlock and Milestone.Accept implement upstream's markRemoteLocked and
// markRemoteResolved for rebuilding a remote.
//
// All parsers accept any input without panicking and fail with errors
// wrapping engine.ErrMalformed; values this package does not model are
// kept so that documents written by the plugin round-trip without loss.
// No error message contains a salt.
package negotiate
