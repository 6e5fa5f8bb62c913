package hunt

import (
	"context"
	"time"

	"github.com/livesync-go/livesync-go/engine"
)

// EventKind says what an Event reports.
type EventKind uint8

// Events of a Hunt.
const (
	// EventCompleted: every missing chunk of Doc is local now.
	EventCompleted EventKind = iota + 1
	// EventPassEnded: a pass of Doc ended with Missing chunks still
	// missing; the next pass starts after Next (Config.Once: never, the
	// document is dropped).
	EventPassEnded
	// EventRequestFailed: a request of Doc to Source for IDs failed
	// (Err; a cancelled request by Close is not reported).
	EventRequestFailed
	// EventAnswered: Source answered a request for IDs of Doc: Found of
	// them found (Err set when the request failed).
	EventAnswered
)

func (k EventKind) String() string {
	switch k {
	case EventCompleted:
		return "completed"
	case EventPassEnded:
		return "pass-ended"
	case EventRequestFailed:
		return "request-failed"
	case EventAnswered:
		return "answered"
	}
	return "unknown"
}

// Event is one thing the Hunt did, reported through Deps.OnEvent.
type Event struct {
	Kind EventKind
	Doc  string
	// Source is the throttle key of the source asked.
	Source string
	// IDs are the ids of a request (EventAnswered, EventRequestFailed).
	IDs []engine.ChunkID
	// Found counts the chunks a request found (EventAnswered).
	Found int
	// Attempt is the document's count of passes that ended incomplete.
	Attempt int
	// Missing are the ids still missing after a pass (EventPassEnded).
	Missing []engine.ChunkID
	// Next is the delay before the document's next pass (EventPassEnded;
	// 0 in Config.Once mode).
	Next time.Duration
	Err  error
}

// queue records e under the lock, for flush to deliver after it.
func (h *Hunt) queue(e Event) {
	if h.onEvent != nil {
		h.pending = append(h.pending, e)
	}
}

// flush delivers the queued events and wakes Wait; called without the
// lock.
func (h *Hunt) flush() {
	h.mu.Lock()
	evs := h.pending
	h.pending = nil
	h.flushing++
	h.mu.Unlock()
	for _, e := range evs {
		h.onEvent(e)
	}
	h.mu.Lock()
	h.flushing--
	h.changed()
	h.mu.Unlock()
}

// changed wakes every Wait (under the lock).
func (h *Hunt) changed() {
	if h.waiters != nil {
		close(h.waiters)
		h.waiters = nil
	}
}

// Wait returns when no document is hunted any more (every one completed,
// removed or, in Config.Once mode, done with its pass), when the Hunt is
// closed, or with ctx's error. The events of the change that ended the last
// hunt have been delivered to Deps.OnEvent when it returns (unless the
// Hunt was closed).
func (h *Hunt) Wait(ctx context.Context) error {
	// Every queued event is delivered before Wait returns: a caller that
	// reads what the events told it after Wait sees all of it.
	return h.waitFor(ctx, func() bool { return len(h.list) == 0 && len(h.pending) == 0 && h.flushing == 0 })
}

// waitFor returns nil once done (called with h.mu held) holds or the Hunt
// is closed, rechecking whenever the Hunt signals its waiters, or ctx's
// error.
func (h *Hunt) waitFor(ctx context.Context, done func() bool) error {
	for {
		h.mu.Lock()
		if h.closed || done() {
			h.mu.Unlock()
			return nil
		}
		if h.waiters == nil {
			h.waiters = make(chan struct{})
		}
		ch := h.waiters
		h.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
