// Package hunt finds the missing chunks of held documents across every
// chunk source: the proactive hunt of the purgatory, a design that
// fetched a git object's missing data from every git server that might
// hold it, here with a note's chunk sources in place of git servers. The
// purgatory (engine/purgatory) holds a metadata revision whose chunks are not all local and calls Enqueue with
// the document's missing chunk ids; the hunt asks sources for them,
// persists what it finds, reports it through Deps.OnDelivered (the
// purgatory's ChunksArrived) and stops when nothing is missing or the
// purgatory calls Remove.
//
// # The life of a hunted document
//
//	Enqueue(doc, needed, origin, delay)
//	   │ new: next = now+delay (3 min after a client push, 500 ms after a pull)
//	   │ known: attempts = 0, next = min(next, now+delay)   (fresh start, debounce)
//	   ▼
//	waiting ──(next ≤ now, timer)──► pass: recheck local store
//	   ▲                                 │
//	   │ backoff 20, 40, 80, 120 s       ▼
//	   │ (attempts+1)             idle: for each source in order (origin first, then by key)
//	   │                           ├─ capacity: start ONE request (≤ BatchSize ids not yet
//	   │                           │  asked of it, not memoized as lacking there, not on
//	   │                           │  the wire elsewhere) ──► running ──(answer)──► idle
//	   │                           │      └─ after HedgeAfter: one hedge on another key
//	   │                           └─ no capacity: queue on that source (round robin)
//	   └──── nothing left to ask anywhere this pass
//	found ids are persisted, dropped from every document, landed, reported;
//	needed empty ──► complete (dropped);  Remove ──► dropped
//
// A pass asks every source at most once for each missing id; a source
// that failed is asked again only in the next pass.
//
// # Politeness
//
// Each throttle key (engine.ChunkSource.ThrottleKey: host:port, endpoint
// and bucket, peer id) has a throttle, created on first use: at most
// MaxInFlight (5) requests in flight and MaxPerWindow (30) starts in any
// sliding Window (60 s). A request's permit is checked and reserved in
// one step, so racing documents cannot all take the last slot. Documents
// that found no capacity wait in the source's queue and are served round
// robin, skipping documents that already have a request running. Work is
// triggered when capacity frees (a request ends), on Enqueue, when a
// flight lands, and by one timer: the next due pass, a due hedge, and the
// moment a rate-limited source's window frees. The reference
// implementation had no such timer and stalled a rate-limited domain
// until an unrelated event.
//
// # One request per chunk at a time
//
// The hunt and the file-open fetcher (engine/fetch) share one
// fetch.Coordinator. Before an id goes on the wire its request reserves
// it there (Coordinator.Reserve); an id that another request already
// carries — a file open, or another document's hunt — is skipped, and when
// that flight lands the document rechecks the local store (the winner
// persisted first) before asking anyone. Each (document, source) request
// is decided by one scheduler under one lock, so the queue path and the
// direct path can never send the same request twice. The hunt also claims
// its in-flight ids in the Coordinator, so a waiting reader observes it.
// The only deliberate second request for an id is the hedge: after a
// primary has run HedgeAfter (30 s), one request for the same ids may
// start on a source with another throttle key, holding its own permit;
// never a third.
//
// # The memo
//
// A source that answered it lacks an id is not asked for it again while
// its fingerprint (AddSource's fingerprint func: update sequence,
// listing) is unchanged, for at most MemoTTL (30 min, expired lazily), for
// at most MemoSources (1024) sources. A source without a fingerprint is
// never memoized.
//
// # Events and the single pass
//
// Deps.OnEvent is told, as typed values, when a document completes, when
// a pass ends with chunks missing (and when the next starts), and how
// each source answered each request; callers never read the log to learn
// what the hunt did. With Config.Once every pass is the document's last:
// a document left incomplete is dropped instead of backing off, and Wait
// returns once every enqueued document completed or ended its pass (a
// command line hunts once and reports).
//
// # Bounded runs
//
// A process that may only hunt for a while (a Cron Trigger, a command
// line run on a schedule) hands what it knows to the next one: New,
// AddSource for each source, Restore with the State the previous run
// saved, then the Enqueues (the purgatory's restore makes them), Quiet
// with the run's deadline, State, saved, and Close. Quiet returns once
// nothing is on the wire and every document waits for a backoff, so a
// run ends as soon as it has nothing to do now. Across such runs the
// request starts inside each throttle key's Window, every document's
// attempts and next pass, and the memo carry over, so MaxPerWindow, the
// backoff and the memo hold as in one process; MaxInFlight holds
// because a run ends with nothing in flight (Close cancels what Quiet's
// deadline left). One run at a time may use a State: two runs at once
// would each grant a window's worth of starts.
//
// # Ownership
//
// New starts one driver goroutine; it alone starts requests. Requests and
// local rechecks run on goroutines the Hunt owns. Close cancels them and
// waits. Stats gives counters by source and outcome.
package hunt
