// Package fetch retrieves chunks that a metadata document names but the
// local store lacks. It implements upstream LiveSync's "Chunk Retrieval
// and Waiting" (plugin docs/design_docs/chunk_retrieval_and_waiting.md:
// its ChunkFetcher, ChunkDeliveryCoordinator and ArrivalWaitLayer,
// commonlib src/managers/; engine/FORMAT.md §8): no fixed timeouts; a reader
// waits exactly as long as something observable can still deliver.
//
// # Pieces
//
//   - Coordinator: per-identifier claims. An id is "claimed" while a live
//     Claim owns it; each Claim has an inactivity fuse (5 minutes).
//     Events (claimed, delivered, remote-missing, failed, released) are
//     published to subscribers.
//   - Wire registry (Coordinator.Reserve, Flight): the single flight per
//     identifier shared by every Fetcher and the purgatory hunt. An id is
//     put on the wire only by the party that reserved it; a loser waits
//     for that flight to land, rechecks the local store (the winner
//     persisted first) and only then asks for what is still missing.
//   - Fetcher: direct fetch by id from an engine.ChunkSource, batched,
//     throttled and retried.
//   - Layer: the arrival wait. One shared waiter per missing id; it
//     observes claims and the finite-replication count of
//     engine/activity.
//   - PolicyFor: the retrieval policy matrix (remote capability ×
//     waitForReady).
//
// # The lifecycle of one missing chunk
//
//  1. Claim. A read misses locally. Layer.Get registers a waiter and, if
//     the remote can fetch by id, calls Fetcher.Request, which claims the
//     id in the Coordinator before it returns. An id the fetcher already
//     owns keeps its claim and its retry time.
//  2. Queue. The claim runs inside a bounded-activity boundary
//     (activity.RunBounded, label "chunk-fetch"); once entered, its ids
//     join a min-heap ordered by (eligible time, arrival order), so old
//     eligible work precedes new work and every step is O(log n).
//  3. Throttle. At most Concurrency (40) requests hold a slot; a request
//     takes up to BatchSize (100) eligible ids, retries and new ids
//     mixed. After every wait or local recheck it checks MinInterval
//     (50 ms) against the latest shared request start and reserves its
//     start synchronously. No id is ever on the wire twice at once, by
//     this fetcher or by anyone sharing its Coordinator: an id another
//     party's flight carries is blocked until it lands, then rechecked.
//  4. Request and persist. Found chunks are validated, persisted with
//     LocalChunks.PutChunks, and only then settled (EventDelivered), so
//     the claim covers persistence.
//  5. Settle or retry. An id answered missing (a successful omission)
//     gets a per-id backoff: 2 s after the first omission, then 4, 6, 8,
//     10, 10… s while finite replication runs. Backoff frees the
//     concurrency slot but keeps the claim; one owned timer wakes the
//     queue at the earliest retry. A retry rechecks the local store
//     first.
//  6. Final probe. When the finite count falls to zero, backoff is
//     interrupted, pending ids are rechecked locally, and the rest are
//     probed again. A probe is current only if it started with no finite
//     producer running and none started before it answered; the first
//     omission of an id is never terminal. A current omission of an id
//     already omitted before is the terminal EventRemoteMissing.
//  7. Other ends. A transport or auth error, or an invalid answer, ends
//     the id with EventFailed (no retry). No active source, a runner that
//     refuses the boundary, and Close release it (EventReleased).
//  8. Fuse. A claim with no observable progress (boundary entered, an
//     answer for one of its ids, a settlement) for StallTimeout (5 min)
//     is released with ErrStalled. That never means the remote lacks the
//     chunk, and a request on the wire is not aborted; its late answer is
//     stale and cannot settle, refresh or report for a newer claim.
//
// The waiter resolves on a delivery, an explicit remote-missing, a
// failure, a replicated arrival (Layer.Arrived) or a deletion. When the
// last observed producer ends, it rechecks the local store once,
// bypassing caches, and returns the chunk or ErrNotDelivered, with no
// extra grace. If activity restarts during that recheck, the recheck is
// stale and the waiter stays open. If nothing was observable after
// dispatch, the read is unavailable at once (ErrNoProducer).
//
// # Ownership
//
// Fetcher and Layer own their goroutines; Close cancels and waits. Each
// Fetcher's Stats gives one atomic snapshot of its pending ids, split into
// Initial (never omitted) and Retrying (omitted at least once).
package fetch
