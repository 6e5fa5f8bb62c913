// Package journalsync is LiveSync's object-storage replicator ("journal
// sync", engine/FORMAT.md §6) over the engine's local store: it receives the
// journal packs other devices uploaded to a bucket and sends this
// device's changes as new packs. It mirrors commonlib
// src/replication/journal/JournalSyncCore.ts and is transport-neutral:
// the bucket is the Objects port (adapters/minio.Bucket implements it
// over S3, MinIO and R2), the pack format is engine/journal.
//
// # Use
//
//	cipher, err := journalsync.CipherFor(settings, salt) // nil: plain packs
//	j, err := journalsync.New(journalsync.Config{
//		Local:  st,     // store.Store
//		Remote: bucket, // journalsync.Objects
//		Cipher: cipher,
//		Epoch:  negotiate.JournalEpoch(params), // "2:<pbkdf2salt>", from the sync parameters
//		Activity: tracker, Holder: purg, Arrivals: purg,
//	})
//	res, err := j.Sync(ctx)    // Receive, then Send if receiving succeeded
//	res, err = j.Receive(ctx)  // only receive
//	res, err = j.Send(ctx)     // only send
//
// Receive lists the packs after the greatest one received, skips the ones
// this device sent, received or quarantined, and applies each in key
// order (journal.ComparePackKeys): chunks are stored only when absent;
// documents go through RevsDiff, then BulkDocs with new_edits=false, so
// revision trees, tombstones and conflicts arrive as they were sent; then
// chunk ids go to Config.Arrivals and every written metadata revision to
// Config.Holder (the purgatory) with the journal's id as source. Receive
// and Sync run inside Activity.RunFinite: they deliver local documents,
// and when they return every pack listed at the start was dealt with.
//
// Send reads the local changes feed (every leaf of every changed
// document) since the last sent change, drops the revisions that came
// from the journal or were sent before, and packs the rest: chunks as
// chunk records, everything else as its JSON with _revisions. A pack is
// sealed when it holds more than 250 records or 10 MiB (upstream's
// limits, Config.MaxPackRecords and MaxPackBytes) and uploaded with one
// Put under journal.PackKey(prefix, now), where now is raised to one
// millisecond after the newest pack key this device knows, so keys only
// increase. Put is create-only: when another device took the key (two
// devices sending in the same millisecond), it fails with ErrExists, and
// Send lists the bucket after that key and uploads the same pack under
// one millisecond after the newest key listed (at most 16 keys, then an
// error; nothing is overwritten and nothing is recorded as sent). Send
// runs inside Activity.RunBounded, as engine/replicate
// runs a push: it delivers nothing locally, so it must not keep readers
// waiting for chunks (only a finite run that can deliver them does).
//
// # Checkpoint
//
// What this device received and sent is kept in the local store under
// the _local id CheckpointID(Remote.ID()) ("bucketsync-checkpoint-" +
// btoa(encodeURI(id)), upstream's name): lastLocalSeq, journalEpoch,
// knownIDs (keys of received records), sentIDs, receivedFiles, sentFiles
// (upstream's fields), plus the quarantine and the chunk index. It is
// saved after every pack received or sent, so an interrupted run resumes
// at the next pack: applying a pack twice is harmless, and a pack that
// failed to upload is sent again with only the records that were not
// acknowledged (lastLocalSeq never covers a change whose records are not
// in an uploaded pack).
//
// To keep saves cheap, that document holds only the small fields and
// counts segments stored beside it (ids with the suffix
// ".<generation>.<n>"), which hold the sets and the index: a save appends
// what was added since the last save as one segment and rewrites the
// small document, and the log is folded into a new base when it outgrows
// the old one. At 10,000 notes of one chunk the checkpoint holds about
// 825 KB; a save after a pack writes about 11 KB, and receiving all
// 10,000 notes writes about 2 MB of checkpoint in all (rewriting one
// document after every pack would write about 33 MB). A segment is always
// written before the document that counts it, so a crash leaves the
// previous checkpoint whole.
//
// When Config.Epoch differs from the recorded epoch and the newest pack
// this device sent is gone from the bucket, the bucket was wiped: the
// sets, the index and the quarantine are cleared (engine/FORMAT.md §6.5). An
// unreadable checkpoint is an error that changes nothing;
// ResetCheckpoint starts over.
//
// # Errors and quarantine
//
// A pack that cannot be listed or downloaded stops the run with the
// adapter's error (it has retried already); the run can be repeated.
// Authentication errors are returned at once. A pack that downloads but
// does not open (failed decryption, broken DEFLATE, a malformed record,
// too large) is quarantined: its key, stage and error text (never its
// content) go into the checkpoint and Result.Quarantined, a warning is
// logged, and the run goes on with the next pack. Later runs skip it,
// unless Config.RetryQuarantined is set or ClearQuarantine releases it
// for one more try. One exception: when every pack of a run fails to
// decrypt and the key never opened a pack of this journal, or no longer
// opens the last pack it opened, the passphrase is wrong, not the packs:
// Receive returns an *engine.Error wrapping engine.ErrDecrypt and
// quarantines nothing. (Without a Cipher, packs that do not inflate are
// treated the same way: the journal is probably encrypted.)
//
// # Chunk index and ChunkSource
//
// While receiving and sending, the journal records which pack holds
// which chunk id. ChunkSource returns an engine.ChunkSource over that
// index: FetchChunks groups the ids by pack and reads each pack once.
// Packs are compressed, and maybe encrypted, as a whole, so one chunk
// cannot be read with a byte-range request: the whole object is
// downloaded and decoded, and the decoded chunks of recent packs are
// kept in a small LRU cache (Config.PackCacheBytes) so nearby fetches
// cost no request. Ids the index does not know are looked up on demand:
// the bucket is listed after the newest indexed pack and new packs are
// downloaded and indexed (not applied to the store); ids still unknown
// are answered Missing. Stats counts lists, downloads, cache hits and
// chunks served.
//
// Upstream treats the journal as a "sequential replicator": its chunks
// arrive only through finite replication, never by id (engine/FORMAT.md §6.6).
// That remains the default: CanFetchDirect reports Config.DirectFetch,
// which is false unless set, and engine/fetch's policy matrix then gives
// upstream's verdicts for this remote. Set DirectFetch to let readers and
// the purgatory hunt fetch chunks from the journal by id.
//
// # Differences from upstream, on purpose
//
//   - Known revisions are dropped before they are read (their keys follow
//     from the changes feed), and a Send with nothing to upload still
//     advances lastLocalSeq, so a device that only receives does not
//     re-read its whole feed on every run.
//   - lastLocalSeq advances to the last change wholly inside uploaded
//     packs; upstream records the sequence of the whole page after a
//     pack that ends in the middle of it, and can skip records if the
//     next upload fails.
//   - A failed listing in the epoch check is an error; upstream takes it
//     as a wipe and clears its bookkeeping.
//   - A deleted chunk revision (no data) is not sent; upstream's
//     serializer throws on it.
//   - Pack keys never repeat or go backwards on this device, and a pack
//     never replaces another device's pack under the same key: upstream
//     uploads unconditionally, so of two devices sending in the same
//     millisecond one loses its pack and both report success.
//
// Example (in example_test.go) runs a laptop, a phone and a tablet
// against an in-memory bucket.
package journalsync
