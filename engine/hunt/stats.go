package hunt

import "time"

// Stats is one snapshot of a Hunt (its counters and gauges).
type Stats struct {
	// Gauges.
	Docs        int // documents hunted (Hunting + Waiting)
	Hunting     int // documents in a pass
	Waiting     int // documents waiting for their first pass or a backoff
	InFlight    int // hunt requests on the wire
	MemoSources int // sources with a live memo

	// Counters since New.
	Completed uint64 // documents whose missing chunks all became local
	Removed   uint64 // documents removed by the caller before completing
	Hedges    uint64 // hedge requests started
	MemoHits  uint64 // (document pass, source, id) skipped because the source lacked the id

	// Sources by throttle key.
	Sources map[string]SourceStats
}

// SourceStats are one source's counters (requests by outcome, chunks
// found) and gauges.
type SourceStats struct {
	Requests uint64 // requests started
	Found    uint64 // answered with at least one chunk
	Missing  uint64 // answered without any requested chunk
	Failed   uint64 // ended by a transport error
	Canceled uint64 // cancelled by Close
	Chunks   uint64 // chunks found
	// MaxWait is the longest a document that wanted a request waited
	// between becoming ready (pass start, previous request ended) and
	// getting this source's permit.
	MaxWait time.Duration

	InFlight int // requests on the wire now
	InWindow int // request starts inside the sliding window now
	Queued   int // documents queued for capacity now
}
