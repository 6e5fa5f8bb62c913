// Package purgatory holds metadata revisions whose chunks are not all
// local, so that a note is never served half-arrived, and releases them
// when their chunks arrive by any path: late binding (the newest complete
// revision is released), remembered expiry, and the arrival timelines A–E
// the tests name (A: metadata pushed before its chunks; B: chunks first;
// C: metadata pulled, chunks hunted; D: chunks never arrive; E: a
// soft-expired document revived), with 3 min / 500 ms first delays,
// 30 min of active hunting and 24 h of soft expiry. Finding the chunks is
// the job of a Hunter (engine/hunt); this package decides what is held,
// when it is hunted, when it is released and when it is given up.
//
// # Use
//
// Call Hold for every metadata revision that lands in the local store
// (hold.FromMeta turns a livesync.Meta into a hold.Revision; Hold and
// Retry answer a hold.Outcome), with its source:
// ClientPush when a client pushed it to us, else the ThrottleKey of the
// source replication pulled it from. Call ChunksArrived whenever chunks
// become local (replication, a push, the hunt's OnDelivered, a file
// open). Deps.Release verifies and materialises a revision; it is the
// only way a held revision is ever served. Held and Stats feed /status
// and metrics; Snapshot and Restore carry the state across a restart.
//
// # The life of a held document
//
// One entry per document holds all its held revisions; the chunks it
// needs are the union of their missing chunk ids.
//
//	Hold(rev), all chunks local ──► Release ──► served (never held)
//	       │ some chunks missing
//	       ▼
//	┌──────────────┐  new revision: Enqueue (attempts reset, fresh 30 min)
//	│    ACTIVE    │◄───────────────────────────────────┐
//	│ hunted; held │  Retry: Enqueue with no delay      │
//	└──────┬───────┘                                    │
//	       │ 30 min without a new revision              │ new revision
//	       │ Hunter.Remove                              │ or Retry
//	       ▼                                            │
//	┌──────────────┐────────────────────────────────────┘
//	│ SOFT-EXPIRED │  not hunted; same revision re-delivered: no change
//	│    held      │
//	└──────┬───────┘
//	       │ 24 h later
//	       ▼
//	EXPIRED: dropped; each revision remembered 7 days. Hold of it returns
//	PreviouslyExpired (no hunt, no loop); Retry bypasses the memory.
//
//	In ACTIVE or SOFT-EXPIRED, when chunks arrive (any path):
//	  the newest complete revision is released (late binding);
//	  revisions older than it are dropped as Superseded;
//	  no revisions left ──► entry gone (Hunter.Remove if hunted);
//	  else the Hunter gets the smaller needed set.
//
// # Rules
//
// Newer means CouchDB's order: a higher generation ("N-" prefix), then
// for equal generations the greater rev id as a string (CompareRevs).
// The newest complete revision is released even if a newer one is still
// incomplete (the file then moves forward again when that one
// completes), but a revision is never released after a newer one of the
// same document was: after a release, older held revisions are dropped
// and the released revision is remembered for 7 days, so an older one
// delivered later is Superseded. That memory exists only for documents
// that waited in the purgatory; for documents that never waited,
// revision order is the caller's store's (its winning revision).
//
// Release failures are classified by error type (Deps.Release): a failed
// verification (decrypt, malformed, size, unsupported) rejects the
// revision for good — dropped, remembered like an expired one, counted,
// logged, never served — and the next newest complete revision, if any,
// is tried; a missing chunk rechecks the local store and keeps the
// revision held; engine.ErrNotFound drops it quietly; anything else
// keeps it held and retries after 30 s.
//
// Active hunting lasts 30 minutes from the document's first hold, its
// latest new revision or Retry, whichever is last. The first hunt waits
// 3 minutes for a client push (its chunks normally follow in the same
// push) and 500 ms for pulled metadata (batching bursts); Retry asks for
// no delay. Expiry deadlines derive from the previous deadline, never
// from the time the driver woke, so late ticks and restores land where
// on-time ones would.
//
// # Concurrency
//
// Hold, Retry and ChunksArrived may be called from any goroutine.
// ChunksArrived only queues; one driver goroutine, owned by the
// Purgatory and stopped by Close, applies arrivals, retries failed
// releases and moves entries through their deadlines. Releases are
// serialised (one Deps.Release at a time), so the release order of a
// document is total. Hunter methods are called under the purgatory's
// lock, in decision order; they must not call back into Hold or Retry.
//
// # Observability
//
// Stats gives gauges (active, soft-expired, remembered) and counters
// (releases, soft expiries, expiries, revivals, verification failures,
// release errors, superseded). Logs use the keys doc, rev, source
// ("client" for a push), reason; exactly one line, "purgatory: document
// expired", is written when a document expires. Note contents never
// reach logs, errors, Held or snapshots.
package purgatory
