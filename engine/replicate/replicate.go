package replicate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/hold"
)

// Defaults of Config. DefaultBatchesLimit is LiveSync's batches_limit.
// DefaultBatchSize is larger than LiveSync's batch_size of 25: that value
// tunes PouchDB's replicator, and against a CouchDB-protocol server most of
// a pull's cost is per request, so pages of 100 (the size of the chunk
// fetcher's batches) pull about 1.5 times faster than pages of 25
// (tests/bench/pull). A failed or too-large write still shrinks the sizes with
// upstream's fallback (100, 52, 28, 16, 10, 7, 6, 5). Set BatchSize to 25
// to reproduce PouchDB's request pattern exactly.
const (
	DefaultBatchSize    = 100
	DefaultBatchesLimit = 25
	DefaultMinBackoff   = time.Second
	DefaultMaxBackoff   = 60 * time.Second

	// DefaultRemoteCheckpointBatches and DefaultRemoteCheckpointInterval
	// space the checkpoint writes on the remote endpoint (see
	// Config.RemoteCheckpointBatches).
	DefaultRemoteCheckpointBatches  = 10
	DefaultRemoteCheckpointInterval = 10 * time.Second
)

// ChunksOnlineSelector is the Mango selector of a readChunksOnline pull:
// every document except chunks (engine/FORMAT.md §5.2 step 5, §5.6).
var ChunksOnlineSelector = json.RawMessage(`{"type":{"$ne":"leaf"}}`)

// ErrClosed is returned by runs started after Close.
var ErrClosed = errors.New("replicate: replicator closed")

// Direction says which way documents travel between the local and the
// remote endpoint.
type Direction uint8

// Directions. Sync is both.
const (
	Pull Direction = 1 << iota // remote → local
	Push                       // local → remote
	Sync = Pull | Push
)

func (d Direction) String() string {
	switch d {
	case Pull:
		return "pull"
	case Push:
		return "push"
	case Sync:
		return "sync"
	}
	return fmt.Sprintf("Direction(%d)", uint8(d))
}

// Activity is the activity boundary a run enters (*activity.Tracker).
// One-shot pulls and syncs and the live catch-up run inside RunFinite;
// a push-only run cannot deliver a local document and runs inside
// RunBounded (engine/activity: a finite run is complete when its
// replicator has reached the latest sequence in its scope).
type Activity interface {
	RunFinite(ctx context.Context, label string, fn func(context.Context) error) error
	RunBounded(ctx context.Context, label string, fn func(context.Context) error) error
}

// Holder receives every pulled metadata revision (*purgatory.Purgatory
// satisfies it): it releases revisions whose chunks are local and holds
// the others.
type Holder interface {
	Hold(ctx context.Context, r hold.Revision, source string) (hold.Outcome, error)
}

// Arrivals is told about chunks a pull wrote to the local endpoint
// (*purgatory.Purgatory satisfies it).
type Arrivals interface {
	ChunksArrived(ids []engine.ChunkID)
}

// Progress is reported after every batch of a direction, for progress
// bars. Counts are totals of the current run.
type Progress struct {
	Direction Direction // Pull or Push
	// DocsRead counts revisions fetched from the source (BulkGet).
	DocsRead int
	// DocsWritten counts revisions written to the target.
	DocsWritten int
	// WriteFailures counts revisions the target refused one by one
	// (forbidden, unauthorized); they are skipped, as PouchDB does.
	WriteFailures int
	// LastSeq is the source sequence checkpointed last (opaque).
	LastSeq string
	// Pending is the source's count of changes left after the batch, -1
	// if unknown.
	Pending int
}

// Result is the outcome of a one-shot run: the last progress of each
// direction that ran.
type Result struct {
	Pull, Push Progress
}

// Config configures a Replicator. Zero values mean the documented
// defaults; Local and Remote are required.
type Config struct {
	// Local is the local replica (normally an engine/store Store);
	// Remote the other side, usually wrapped by Transform.
	Local, Remote engine.Endpoint
	// LocalID and RemoteID identify the endpoints in the replication id
	// (for example a store path and a database URL without credentials).
	// Empty means the endpoint's Info().Name.
	LocalID, RemoteID string
	// BatchSize is batch_size: changes per page (default 100, see
	// DefaultBatchSize).
	BatchSize int
	// BatchesLimit is batches_limit: pages read ahead and in flight at
	// most (default 25).
	BatchesLimit int
	// Selector filters pulls (the remote's changes feed); use
	// ChunksOnlineSelector for readChunksOnline. It is part of the pull's
	// replication id, so changing it restarts the pull from the start.
	Selector json.RawMessage
	// Holder, if set, gets every pulled metadata revision with source
	// HoldSource (normally the remote's ThrottleKey, so the purgatory
	// applies the pulled-metadata delay).
	Holder     Holder
	HoldSource string
	// Arrivals, if set, is told the ids of pulled chunks.
	Arrivals Arrivals
	// Activity, if set, is the boundary of one-shot runs and the live
	// catch-up (an *activity.Tracker).
	Activity Activity
	// Progress, if set, is called after every batch. Live runs call it
	// from one goroutine per direction.
	Progress func(Progress)
	// MinBackoff and MaxBackoff bound the live reconnection delay after
	// transport errors (default 1 s doubling to 60 s; reset on success).
	MinBackoff, MaxBackoff time.Duration
	// A pull's checkpoint is written on the local endpoint after every
	// write, on the remote one (the source of a pull, the target of a
	// push, and with a push's also the local one) only
	// once RemoteCheckpointBatches batches (default 10) or
	// RemoteCheckpointInterval (default 10 s) have passed since its last
	// write, when the source is caught up, and at the end of every pass
	// (completion, error after a batch, cancellation). Fewer requests to
	// the server; a lagging remote checkpoint only means a resumed run
	// re-lists some changes, never re-transfers documents (RevsDiff on the
	// target filters them). 1 writes it after every batch.
	RemoteCheckpointBatches  int
	RemoteCheckpointInterval time.Duration
	// ReadOnlyRemote keeps the checkpoint on the local endpoint only and
	// never writes to the remote one: for reading a remote without
	// leaving a trace (a throwaway replica, a listing). Pushing with it
	// set is an error.
	ReadOnlyRemote bool
	// OnRetry, if set, is told about every failure the replicator
	// handles itself by retrying (see Retry), on the goroutine that
	// retries; for status displays, which must not read the log.
	OnRetry func(Retry)
	// Log is the logger; nil discards.
	Log *slog.Logger
}

// Retry is a failure the replicator handles itself: a live feed
// reconnecting or the live catch-up retrying after Delay, a bulk write
// retried at once with smaller batches, a final remote checkpoint not
// written (the next run re-lists those changes).
type Retry struct {
	// Direction is Pull or Push (Pull for the live catch-up).
	Direction Direction
	// What failed: "live feed", "catch-up", "bulk write" or
	// "final checkpoint".
	What string
	// Delay is the wait before the retry (0: at once, or none).
	Delay time.Duration
	Err   error
}

// retrying reports rt to OnRetry.
func (r *Replicator) retrying(rt Retry) {
	if r.cfg.OnRetry != nil {
		r.cfg.OnRetry(rt)
	}
}

// Validate reports a configuration error.
func (c Config) Validate() error {
	switch {
	case c.Local == nil || c.Remote == nil:
		return errors.New("replicate: Local and Remote endpoints are required")
	case c.BatchSize < 0 || c.BatchesLimit < 0:
		return errors.New("replicate: negative BatchSize or BatchesLimit")
	case c.RemoteCheckpointBatches < 0 || c.RemoteCheckpointInterval < 0:
		return errors.New("replicate: negative RemoteCheckpointBatches or RemoteCheckpointInterval")
	case c.MinBackoff < 0 || c.MaxBackoff < 0 || (c.MaxBackoff > 0 && c.MinBackoff > c.MaxBackoff):
		return errors.New("replicate: invalid backoff bounds")
	}
	if len(c.Selector) > 0 && !json.Valid(c.Selector) {
		return errors.New("replicate: Selector is not valid JSON")
	}
	return nil
}

// validateDirection reports a run that Config forbids.
func (c Config) validateDirection(dir Direction) error {
	if c.ReadOnlyRemote && dir&Push != 0 {
		return errors.New("replicate: ReadOnlyRemote is set, so nothing can be pushed")
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.BatchesLimit == 0 {
		c.BatchesLimit = DefaultBatchesLimit
	}
	if c.RemoteCheckpointBatches == 0 {
		c.RemoteCheckpointBatches = DefaultRemoteCheckpointBatches
	}
	if c.RemoteCheckpointInterval == 0 {
		c.RemoteCheckpointInterval = DefaultRemoteCheckpointInterval
	}
	if c.MinBackoff == 0 {
		c.MinBackoff = DefaultMinBackoff
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = DefaultMaxBackoff
	}
	if c.MaxBackoff < c.MinBackoff {
		c.MaxBackoff = c.MinBackoff
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return c
}

// Replicator replicates between a local and a remote endpoint. It is safe
// for concurrent use; runs of the same direction should not overlap (they
// would share checkpoints).
type Replicator struct {
	cfg Config

	base     context.Context
	stopBase context.CancelFunc
	mu       sync.Mutex
	closed   bool
	runs     sync.WaitGroup
}

// New returns a Replicator for cfg.
func New(cfg Config) (*Replicator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	base, stop := context.WithCancel(context.Background())
	return &Replicator{cfg: cfg.withDefaults(), base: base, stopBase: stop}, nil
}

// Close cancels every run and waits until they have returned. Later runs
// return ErrClosed.
func (r *Replicator) Close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.stopBase()
	r.runs.Wait()
}

// enter registers a run; the returned context ends with ctx or Close.
func (r *Replicator) enter(ctx context.Context) (context.Context, func(), error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, nil, ErrClosed
	}
	r.runs.Add(1)
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(r.base, cancel)
	return ctx, func() { stop(); cancel(); r.runs.Done() }, nil
}

// Pull replicates the remote into the local endpoint once, up to the end
// of the remote's feed, inside the finite activity boundary.
func (r *Replicator) Pull(ctx context.Context) (Result, error) { return r.oneShot(ctx, Pull) }

// Push replicates the local endpoint into the remote once, inside the
// bounded (not finite) activity boundary.
func (r *Replicator) Push(ctx context.Context) (Result, error) { return r.oneShot(ctx, Push) }

// Sync pulls and then pushes once, inside the finite activity boundary.
func (r *Replicator) Sync(ctx context.Context) (Result, error) { return r.oneShot(ctx, Sync) }

func (r *Replicator) oneShot(ctx context.Context, dir Direction) (Result, error) {
	if err := r.cfg.validateDirection(dir); err != nil {
		return Result{}, err
	}
	ctx, done, err := r.enter(ctx)
	if err != nil {
		return Result{}, err
	}
	defer done()
	var res Result
	body := func(ctx context.Context) error {
		if dir&Pull != 0 {
			lg, err := r.leg(ctx, Pull)
			if err != nil {
				return err
			}
			if err := r.runLeg(ctx, lg, &res.Pull); err != nil {
				return err
			}
		}
		if dir&Push != 0 {
			lg, err := r.leg(ctx, Push)
			if err != nil {
				return err
			}
			return r.runLeg(ctx, lg, &res.Push)
		}
		return nil
	}
	label := "replication " + dir.String()
	switch {
	case r.cfg.Activity == nil:
		err = body(ctx)
	case dir&Pull != 0:
		err = r.cfg.Activity.RunFinite(ctx, label, body)
	default:
		err = r.cfg.Activity.RunBounded(ctx, label, body)
	}
	return res, err
}

// runLeg runs one direction to the end of its source feed, shrinking the
// batch sizes after a failed bulk write (engine/FORMAT.md §5.3; commonlib
// LiveSyncReplicator.ts: batch_size = ceil(b/2)+2, batches_limit =
// ceil(l/2)+2 while either is above 5). Each attempt resumes from the
// checkpoint of the previous one.
func (r *Replicator) runLeg(ctx context.Context, lg *leg, p *Progress) error {
	sz := sizes{batch: r.cfg.BatchSize, limit: r.cfg.BatchesLimit}
	for {
		_, err := r.pass(ctx, lg, sz, false, p)
		var be *batchError
		if !errors.As(err, &be) {
			return err
		}
		next, ok := sz.shrink()
		if !ok {
			return be.err
		}
		r.cfg.Log.Warn("replicate: bulk write failed; retrying with smaller batches",
			"direction", lg.dir.String(), "batch_size", next.batch, "batches_limit", next.limit, "err", be.err)
		r.retrying(Retry{Direction: lg.dir, What: "bulk write", Err: be.err})
		sz = next
	}
}

// sizes are batch_size and batches_limit; fallback is set once a failed
// write has shrunk them.
type sizes struct {
	batch, limit int
	fallback     bool
}

func (s sizes) shrink() (sizes, bool) {
	if s.batch <= 5 && s.limit <= 5 {
		return s, false
	}
	return sizes{(s.batch+1)/2 + 2, (s.limit+1)/2 + 2, true}, true
}

// batchError marks a failed bulk write (or a 413) that the size fallback
// handles.
type batchError struct{ err error }

func (e *batchError) Error() string { return e.err.Error() }
func (e *batchError) Unwrap() error { return e.err }

// IsTransport reports whether err is a transport failure (retryable by
// the caller).
func IsTransport(err error) bool {
	var e *engine.Error
	return errors.As(err, &e) && e.Stage == engine.StageTransport
}
