// Package livesyncrpc is LiveSync's peer-to-peer replicator over an
// engine/rpcroom Room: the database methods and "legacy/" commands a
// plugin peer serves and calls (commonlib
// src/replication/trystero/TrysteroReplicatorP2PServer.ts,
// TrysteroReplicator.ts, ProxiedDB.ts, rpcCompat.ts), and the pull of
// src/pouchdb/ReplicatorShim.ts. It has no transport and builds for
// js/wasm.
//
// # Use
//
//	p, err := livesyncrpc.New(livesyncrpc.Config{
//		SelfID: selfID, DB: st, DBName: livesyncrpc.DBName(vault),
//		DeviceName: "relay", Tweaks: tweaks, Passphrase: passphrase,
//		AutoAccept: "~^laptop", // headless: other peers are refused
//	})
//	room, err := rpcroom.New(rpcroom.Config{Transport: t, CanAccept: p.CanAccept})
//	err = p.Serve(room)
//	// the transport feeds the "ad" action to p.OnAdvertisement, sends
//	// p.Advertisement() to each joining peer, and calls p.PeerLeft.
//	res, err := p.Sync(ctx, peerID, livesyncrpc.PullOptions{}) // pull, then legacy/reqSync
//
// # Documents
//
// Documents cross in the plugin's local form, in plaintext (the data
// channel's DTLS is the only protection): Config.DB is the vault's
// plaintext replica, a store.Store, never a remote's encrypted form. A
// peer serving an end-to-end encrypted vault therefore needs the vault's
// passphrase to have that replica at all; the passphrase itself never
// crosses, only its three-minute hash in legacy/getTweakSettings
// (PassphraseHash), which the puller compares before it replicates.
//
// # Served methods
//
// The shapes are PouchDB 9's. db.info answers {doc_count, update_seq,
// db_name}; db.changes [{since, style:"all_docs", limit}] answers
// {results:[{id, changes:[{rev}], deleted?, seq}], last_seq} (a limit of
// 0 means 1, since "now" starts at update_seq); db.revsDiff; db.bulkGet
// ({docs:[{id, rev?}], revs} → {results:[{id, docs:[one entry]}]} with
// one result per entry: {ok: doc}, {missing: rev}, or {error: PouchDB
// error object}); db.get, db.put and db.bulkDocs.
// Sequences are the store's decimal sequences sent as JSON numbers, as
// PouchDB's are. _local documents keep PouchDB's "0-N" revisions and
// conflict rule (a write must name the current revision), so the
// plugin's replication marks work unchanged. Errors cross as REMOTE_ERROR
// with PouchDB's message ("missing" for an absent document,
// "Document update conflict") and no details, as commonlib's
// asRpcErrorShape sends a PouchDB error.
//
// # Bounds on a peer's requests
//
// An accepted peer is still treated as hostile: db.changes answers at
// most MaxChangesRows (1,000) rows whatever limit it asks for (callers
// follow last_seq); db.bulkGet takes at most MaxBulkGetDocs (2,000)
// revisions and answers at most MaxBulkGetBytes; db.revsDiff takes at
// most MaxRevsDiffRevs (10,000) revisions, db.bulkDocs at most
// MaxBulkDocs (2,000) documents; legacy/onProgress
// announcements are coalesced (at most the pull running and one more per
// peer); the rpcroom.Room serves at most 64 requests of one peer at a
// time and bounds reassembled messages; JSON nested deeper than
// encoding/json's limit is refused.
//
// The legacy/ commands take the caller's peer id as first argument:
// !reqAuth (whether this peer accepts the caller), getTweakSettings
// (TweakSettings), reqSync (pull from the caller; {ok:true} or {error}),
// onProgress (pull from the caller if Config.Follow names it),
// onProgressAcknowledged (the caller's progress in pulling from this
// peer, reported through Config.OnProgress), getIsBroadcasting and
// requestBroadcasting. getAllConfig is not served: it needs a passphrase
// typed by a user. This peer acts on the transport's sender and refuses
// a command that names another caller, where the plugin trusts the
// argument.
//
// # Access control
//
// Every request but legacy/!reqAuth needs an accepted caller (CanAccept,
// the Room's hook); other requests are dropped without an answer and
// their callers time out, as the plugin drops them. The decision follows
// the plugin's order: no advertisement from the peer, refused; the
// session's decision by peer id; the stored decision by device name
// (Config.Decisions); the auto-accept patterns unless an auto-deny
// pattern also matches (ParsePatterns: comma list, "~regex" or exact
// name, case-insensitive); then a headless peer (no Config.Ask) refuses.
//
// # Pulls
//
// Pull checks that the peer accepts this one (legacy/!reqAuth) and that
// the passphrase hashes agree (other tweak differences are only
// reported), then runs Replicate: the source's mark document
// _local/replication-checkpoint-mark-<target>-<source> upserted with
// db.get and db.put, the target's checkpoint
// _local/replication-checkpoint-<target>-<mark> holding since, and pages
// of 33 changes (revsDiff locally, db.bulkGet of the missing revisions,
// BulkDocs with new_edits=false locally, then the checkpoint) until an
// empty page. Each batch is acknowledged with
// legacy/onProgressAcknowledged, in the background as the plugin does.
// Sync is Pull then legacy/reqSync.
package livesyncrpc
