// Package replicate is the CouchDB replication protocol of the engine
// (PouchDB 9 semantics, engine/FORMAT.md §5.3) between two engine.Endpoints: the
// local replica and a remote. It is transport-neutral; the remote's
// E2EE/obfuscation/compression is the Transform decorator around its
// Endpoint, so the replicator only ever moves documents.
//
// # Use
//
//	r, err := replicate.New(replicate.Config{
//		Local:  store,
//		Remote: replicate.Transform(couch, codec),
//		Activity: tracker,                          // *activity.Tracker
//		Selector: replicate.ChunksOnlineSelector,   // readChunksOnline
//		Holder:   purg, Arrivals: purg, HoldSource: source.ThrottleKey(),
//	})
//	res, err := r.Sync(ctx)      // or Pull, Push: one-shot
//	err = r.Live(ctx, replicate.Sync) // until ctx ends or Close
//
// # A one-shot run
//
// Pull, Push and Sync (pull, then push) run each direction ("leg") once:
//
//  1. Checkpoints: both sides' _local/<ReplicationID> are read; the
//     replication id hashes the source and target identities and the
//     selector, so a different selector starts over. Where both agree
//     (same session, or the newest session both histories know; PouchDB's
//     compareReplicationLogs) the run starts, else from the beginning.
//  2. Pages: the changes are listed ahead by one goroutine, four pages
//     of BatchSize changes a request (cut at their sequences), and each page's RevsDiff (on the target) and BulkGet of
//     the missing revisions (from the source, with _revisions) start at
//     once in a goroutine of their own; at most BatchesLimit pages are
//     read and not yet written, which bounds the fetches in flight.
//  3. Writes, in feed order: BulkDocs with new_edits=false to the target
//     (the consecutive pages already fetched in one call: for a pull one
//     store transaction, for a push one request of at most 1 MiB of
//     documents), then for pulls
//     the hooks: chunk ids to Arrivals, every metadata revision
//     (livesync.ParseMeta, hold.FromMeta) to Holder.Hold with HoldSource,
//     so metadata whose chunks are not local waits in the purgatory with
//     the pulled-metadata delay.
//  4. Checkpoint: the last LastSeq of the pages written is written to
//     the target, then to
//     the source (a source refusing with an auth error is treated as
//     read-only) — on the local side after every write of a pull, on
//     the remote side (and a push's local one) only every
//     Config.RemoteCheckpointBatches batches or
//     RemoteCheckpointInterval, when the source is caught up, and at
//     the end of the pass however it ends. A checkpoint never covers a
//     change not yet written, so an interrupted run resumes without
//     transferring again; a lagging remote checkpoint only makes a
//     resumed run list some changes again, which RevsDiff filters.
//  5. The leg ends at the end of the feed: an empty page, or Pending 0.
//
// A failed bulk write (an error from BulkDocs that is not a transport
// error, a per-document error other than forbidden/unauthorized, or
// engine.ErrTooLarge from any request) restarts the leg from its
// checkpoint with batch_size = ceil(b/2)+2 and batches_limit =
// ceil(l/2)+2, while either is above 5 (commonlib LiveSyncReplicator.ts);
// at 5 and 5 the error ends the run. Transport errors (engine.Error with
// StageTransport) end the run at once: the caller retries. Documents
// refused one by one (forbidden, unauthorized) are skipped and counted.
//
// Pulls and syncs run inside Activity.RunFinite: they may deliver local
// documents, and when they return the remote feed's end has been reached
// and the hooks have run (that is what completing a finite replication
// means); the size fallback stays inside that boundary. A push-only
// run delivers nothing locally and runs inside RunBounded.
//
// # Live
//
// Live first runs a finite pull-only catch-up (a one-shot pull inside
// RunFinite, retried with backoff on transport errors, each attempt its
// own finite operation), then follows each requested direction with
// Changes(Wait=true) from its checkpoint, continuously and outside the
// finite boundary, checkpointing as above. Transport errors reconnect
// after 1 s doubling to 60 s, reset by a successful batch. Live returns
// when ctx ends or Close is called, after its goroutines have ended.
//
// # Concurrency
//
// A Replicator is safe for concurrent use, but two runs of the same
// direction share checkpoints and should not overlap. Close cancels every
// run and waits for them.
package replicate
