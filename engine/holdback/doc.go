// Package holdback is the serving side of the purgatory: a store.Store
// decorator that a CouchDB-protocol endpoint serves,
// so that no client sees a note before its chunks. A metadata revision
// whose chunks the store does not have is held: it is not in Changes,
// AllDocs, BulkGet or Get until its chunks are stored, and when it is
// released it is written to the inner store then, so it appears in the
// feed at a sequence after every sequence a client can have
// checkpointed: nobody skips it.
//
// # Use
//
//	inner, _ := boltstore.Open(path, boltstore.Options{})
//	st, err := holdback.New(holdback.Config{}, holdback.Deps{
//		Inner: inner,
//		Codec: codec,   // with the vault passphrase, or nil
//		Hunter: nil,    // the hunt across upstreams, once there are any
//	})
//	defer st.Close() // closes inner
//	// serve st: BulkDocs, RevsDiff, Changes, BulkGet, … as any store.Store
//	// replicate from an upstream into st.BulkDocsFrom(ctx, key, docs)
//	st.Mode(); st.HeldFirst(100); st.Stats() // for /status and metrics
//	st.BulkDocs(holdback.WithOwner(ctx, user), docs) // counted against user
//
// # A pushed batch
//
//	BulkDocs(docs)                          (new_edits=false, a client's push)
//	  │ classify each document (stored form; with a Codec, obfuscated
//	  │ metadata is decrypted in memory only)
//	  ├─ chunks, non-file documents, metadata that cannot be judged ─┐
//	  ├─ metadata, every chunk stored or in this batch,              ├─► one inner BulkDocs
//	  │  its document not held                                       ┘   └─► ChunksArrived(chunks)
//	  └─ metadata with chunks missing, or of a held document
//	       ├─► holding area: the body as sent, in the inner store's
//	       │   _local "livesync-go/holdback/doc/<id>" (durable, never in
//	       │   the feed), plus an index of such documents
//	       └─► purgatory.Hold(rev, ClientPush)   (first hunt after 3 min)
//	             Held ──► answered {id, rev}; RevsDiff says present
//	             Released (complete) ──► written to inner now
//	             Superseded / PreviouslyExpired ──► dropped unserved
//
//	chunks arrive (any BulkDocs, PutChunks, Put, ChunksArrived)
//	  └─► purgatory releases the newest complete revision:
//	      Release = the held body → inner BulkDocs (new_edits=false):
//	      a new sequence; it and every older revision leave the holding area
//
// Expiry follows the purgatory core: 30 minutes of active hunting, 24
// hours of soft expiry (still released at once if the chunks arrive),
// then the document is dropped and its revisions remembered for 7 days.
// An expired revision is never served: its body leaves the holding area
// at the next save (Config.SaveInterval), RevsDiff then reports it
// missing again, and the same revision pushed again within the 7 days is
// dropped (its chunks still missing) or written through (its chunks
// stored by then). A later revision of the note, pushed with its chunks,
// is written through as usual.
//
// # Limits
//
// Held documents cost memory (about 2.5 KiB each) and a place in
// /status, and a client with a vault's credentials could push metadata
// without chunks at will. Config.MaxHeldDocuments bounds the documents
// held at once (default 10,000), and Config.MaxHeldPerOwner the
// documents held for one user (default 2,000; the user travels in the
// write's context, WithOwner). A revision that would make one more
// document held past either limit is refused with Error TooManyHeld and
// a reason that says what to do; nothing of it is kept, the rest of the
// batch is written, and replicators retry it later. New revisions of
// documents held already count against Config.MaxHeldRevisions (100 per
// document) instead, and one that is complete is never refused: it
// releases its document (late binding). A slot is free again when its document is released, superseded or
// expired. A held revision also keeps its chunk ids in memory (about
// 140 bytes each), so Config.MaxHeldChunkIDs (default 1,000,000) and
// Config.MaxHeldChunkIDsPerOwner (200,000) bound the chunk ids the held
// revisions need, each revision's distinct ids counted: a revision with
// chunks missing that would pass either is refused the same way.
// Held documents and their owners survive a restart; a limit
// lowered below what is held refuses new ones until enough left.
// HeldFirst lists a bounded number of held documents for /status.
//
// # What can be judged
//
// The store keeps documents exactly as clients send them (remote form).
// Without the passphrase (Deps.Codec nil) only metadata whose children
// are readable can be held; metadata with path obfuscation (its children
// encrypted into the path) passes through unheld, as a plain CouchDB
// would serve it (Mode ModePassthroughObfuscated, Stats.Unreadable).
// With the passphrase, the Codec decrypts such metadata in memory to
// read its children (ModeDecrypt); a revision it cannot decode passes
// through and is counted (Stats.Undecodable). Release never decrypts
// chunks: the relay serves what clients pushed, as CouchDB does;
// verifying contents stays the readers' job.
//
// # Rules
//
//   - Late binding: while a document has held revisions, every new
//     revision of it (complete or not, a deletion, one the Store cannot
//     judge) goes through the purgatory, which releases the newest
//     complete revision and never an older one after a newer one. A
//     revision older than one released after waiting is dropped unserved
//     (hold.Superseded), where CouchDB would keep it as a losing
//     conflict; its pusher still has it and resolves the conflict itself. A document's decision and write
//     are one step under a per-document lock, so a concurrent push cannot
//     slip a revision past the purgatory.
//   - Put (new_edits=true, a tool's PUT) is never held: the inner store
//     chooses its revision as it writes. A complete revision put on a
//     held document still goes through the purgatory.
//   - Documents that are not file metadata (chunks, the version
//     document, design documents, foreign documents) and revisions the
//     inner store would refuse are written through unjudged.
//   - The Store's own _local documents (LocalPrefix) can be neither read
//     nor written through it.
//   - A held document with no revision left keeps an empty holding
//     document of a few bytes when the inner store is not a
//     store.LocalUpdater (the Store port cannot delete _local documents).
//
// # Processes sharing the inner store
//
// Over a store.LocalUpdater (the stores store.Open builds: memory, bbolt,
// D1), several Stores may run over one inner store at once, as a Worker's
// isolates do over one D1 database: the holding area is changed only by
// atomic deltas, so no hold is lost to another process's write, and each
// Store resuming holds what the area has. The purgatory state stays
// last-write-wins; the holding area is the truth it is checked against.
//
// # Restart
//
// The purgatory's state (its timers) is saved in the inner store every
// Config.SaveInterval and at Close; New restores it with the downtime
// subtracted, and holds again every body of the holding area the saved
// state does not know (held after the last save), so a crash loses no
// held revision a client was told was stored. A save writes only when the
// state's content differs from what the inner store holds (what New read
// or the last save wrote), timers aside: what time alone does, a restore
// of the older state replays. So a Store opened per request (a Worker)
// writes nothing for a request that held, released and dropped nothing,
// and requests that only read do not contend on the state document.
//
// # A served vault database
//
// Served is a Store as a server serves one vault database: with the
// vault passphrase configured, the hold-back can decrypt obfuscated
// metadata only once the vault's salt exists, and the first client writes
// it after the database was opened. A write of the sync parameters or of
// the milestone (whose preferred settings shape the codec) through a
// Served rebuilds its Store with the vault's codec, the held state saved
// and resumed; ServedHooks let a bridge to upstreams hunt for it and
// follow those writes.
//
// # Concurrency
//
// Every method is safe for concurrent use. Releases are written by the
// purgatory's driver, one at a time. A chunk that arrives between the
// "missing" decision and the hold is not lost: the purgatory reads the
// store again after registering the revision, and Release itself checks
// that every chunk is stored before it writes.
package holdback
