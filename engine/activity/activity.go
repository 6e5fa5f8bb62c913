package activity

import (
	"context"
	"errors"
	"log/slog"
	"sync"
)

// ErrClosed is returned by RunBounded and RunFinite after Close: the
// runner rejected the operation without entering it.
var ErrClosed = errors.New("activity: tracker closed")

// State is one consistent reading of the counts.
type State struct {
	// Bounded counts running bounded operations, finite ones included.
	Bounded int
	// Finite counts running finite replication operations.
	Finite int
	// FiniteStarts counts every finite operation ever entered. It only
	// grows; two equal readings with Finite == 0 between them prove that
	// no finite producer ran in between.
	FiniteStarts uint64
}

// Quiescent reports whether no finite replication is running.
func (s State) Quiescent() bool { return s.Finite == 0 }

// Tracker holds the activity counts. The zero value is not usable; call
// New. A Tracker is safe for concurrent use.
type Tracker struct {
	log *slog.Logger

	mu      sync.Mutex
	state   State
	closed  bool
	subs    []subscriber // in subscription order, so notification order is deterministic
	nextSub uint64
}

// New returns a Tracker. A nil logger discards.
func New(log *slog.Logger) *Tracker {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Tracker{log: log}
}

// State returns the current counts.
func (t *Tracker) State() State {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.state
}

// Subscribe registers fn to be called after every transition of the
// finite count between zero and non-zero. fn runs on the goroutine that
// caused the transition, without locks held; it must not block, and it
// must read State for the current counts because notifications of
// concurrent transitions may arrive in either order. The returned
// function unsubscribes; it is idempotent.
func (t *Tracker) Subscribe(fn func()) (cancel func()) {
	t.mu.Lock()
	id := t.nextSub
	t.nextSub++
	t.subs = append(t.subs, subscriber{id, fn})
	t.mu.Unlock()
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		for i, s := range t.subs {
			if s.id == id {
				t.subs = append(t.subs[:i:i], t.subs[i+1:]...)
				return
			}
		}
	}
}

// RunBounded runs fn as bounded remote activity: the bounded count is
// raised before fn is entered and lowered when fn returns (or panics).
// label is diagnostic only. It returns fn's error, or ErrClosed without
// calling fn after Close.
func (t *Tracker) RunBounded(ctx context.Context, label string, fn func(context.Context) error) error {
	return t.run(ctx, label, false, fn)
}

// RunFinite runs fn as finite replication: both counts are raised before
// fn is entered and lowered when fn returns, whatever its outcome. fn must
// return only once its operation can deliver no more documents (success:
// the latest sequence of its scope was reached and its change callbacks
// ran; failure: it stopped). label (for example "replication") is
// diagnostic only. It returns fn's error, or ErrClosed without calling fn
// after Close.
func (t *Tracker) RunFinite(ctx context.Context, label string, fn func(context.Context) error) error {
	return t.run(ctx, label, true, fn)
}

type subscriber struct {
	id uint64
	fn func()
}

func (t *Tracker) run(ctx context.Context, label string, finite bool, fn func(context.Context) error) (err error) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return ErrClosed
	}
	t.state.Bounded++
	var notify []func()
	if finite {
		t.state.Finite++
		t.state.FiniteStarts++
		if t.state.Finite == 1 {
			notify = t.subscribers()
		}
	}
	t.mu.Unlock()
	call(notify)
	if finite {
		t.log.Debug("finite activity started", "label", label)
	}

	// The boundary ends however fn ends: error, success or panic (the
	// deferred call runs while a panic unwinds, and the panic goes on).
	defer func() {
		t.mu.Lock()
		t.state.Bounded--
		var notify []func()
		if finite {
			t.state.Finite--
			if t.state.Finite == 0 {
				notify = t.subscribers()
			}
		}
		t.mu.Unlock()
		if finite {
			t.log.Debug("finite activity ended", "label", label, "err", err)
		}
		call(notify)
	}()
	return fn(ctx)
}

// Close makes later RunBounded and RunFinite calls fail with ErrClosed.
// Running operations are not affected; their boundaries end when they
// return.
func (t *Tracker) Close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
}

func (t *Tracker) subscribers() []func() {
	fns := make([]func(), 0, len(t.subs))
	for _, s := range t.subs {
		fns = append(fns, s.fn)
	}
	return fns
}

func call(fns []func()) {
	for _, fn := range fns {
		fn()
	}
}
