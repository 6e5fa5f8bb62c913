package vault

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/hold"
	"github.com/livesync-go/livesync-go/engine/journalsync"
	"github.com/livesync-go/livesync-go/engine/replicate"
)

// Polling of a live sync with a journal: every DefaultPollInterval;
// after failures the pause doubles, up to MaxPollBackoff.
const (
	DefaultPollInterval = 10 * time.Second
	MaxPollBackoff      = 5 * time.Minute
)

// ErrMetadataOnlyJournal refuses a metadata-only pull from a journal:
// its packs carry chunks and metadata together.
var ErrMetadataOnlyJournal = errors.New("vault: a metadata-only pull needs a replication endpoint: journal packs carry chunks and metadata together")

// ErrReadOnly refuses a push through a link attached read-only.
var ErrReadOnly = errors.New("vault: the remote was attached read-only")

// errNoRemotes refuses Attach and Replicate in a program built without
// remote adapters (see remotesLinked).
var errNoRemotes = errors.New("vault: this build has no remote support (built with the tags nocouchdb and nos3)")

// SyncOptions are the choices of one sync.
type SyncOptions struct {
	// Live keeps syncing until ctx ends (or Close), reconnecting after
	// failures; the sync then returns ctx's error.
	Live bool
	// MetadataOnly pulls metadata without chunks (LiveSync's
	// readChunksOnline); Read and Hunt fetch them on demand. Replication
	// endpoints only.
	MetadataOnly bool
	// RetryQuarantined tries the journal packs that could not be opened
	// before (quarantined) again.
	RetryQuarantined bool
	// Interval is the pause between two polls of a live sync with a
	// journal (default Options.PollInterval, else DefaultPollInterval).
	Interval time.Duration
}

// SyncResult is the outcome of a one-shot sync.
type SyncResult struct {
	// Pull and Push are each direction's counts (a journal's records
	// count as documents; LastSeq is the newest pack key).
	replicate.Result
	// Journal is what a journal's run did (nil for an endpoint).
	Journal *journalsync.Result
	// Quarantined lists the journal packs that could not be opened: set
	// aside by this run or an earlier one.
	Quarantined []journalsync.Quarantine
}

// NewlyQuarantined reports whether q was set aside by this run.
func (r SyncResult) NewlyQuarantined(q journalsync.Quarantine) bool {
	if r.Journal == nil {
		return false
	}
	for _, n := range r.Journal.Quarantined {
		if n.Key == q.Key {
			return true
		}
	}
	return false
}

// Pull brings the remote's changes into the replica.
func (v *Vault) Pull(ctx context.Context, l *Link, o SyncOptions) (SyncResult, error) {
	return v.Replicate(ctx, l, replicate.Pull, o)
}

// Push sends the replica's changes to the remote.
func (v *Vault) Push(ctx context.Context, l *Link, o SyncOptions) (SyncResult, error) {
	return v.Replicate(ctx, l, replicate.Push, o)
}

// Sync pulls, then pushes.
func (v *Vault) Sync(ctx context.Context, l *Link, o SyncOptions) (SyncResult, error) {
	return v.Replicate(ctx, l, replicate.Sync, o)
}

// run is one sync in progress: the held files it notes.
type run struct {
	v *Vault
	t *tracker
}

func (r *run) event(e Event) { r.v.emit(e) }

func (r *run) Hold(ctx context.Context, rev hold.Revision, source string) (hold.Outcome, error) {
	return r.t.Hold(ctx, rev, source)
}

func (r *run) ChunksArrived(ids []engine.ChunkID) { r.t.ChunksArrived(ids) }

// commit settles what arrived so far; a failure is logged, the final
// commit reports it.
func (r *run) commit(ctx context.Context) {
	if err := r.t.commit(ctx); err != nil && ctx.Err() == nil {
		r.v.log.Warn("vault: recording held files failed", "err", err)
	}
}

// Replicate syncs the replica with the attached remote l in direction
// dir: through engine/replicate for a replication endpoint, through
// engine/journalsync for a journal. One-shot runs record the time and
// position in the replica's memory of the remote. Pulled metadata whose
// chunks are missing is held (FileHeld); progress is reported as events.
func (v *Vault) Replicate(ctx context.Context, l *Link, dir replicate.Direction, o SyncOptions) (SyncResult, error) {
	if !remotesLinked {
		return SyncResult{}, errNoRemotes
	}
	ctx, end, err := v.begin(ctx)
	if err != nil {
		return SyncResult{}, err
	}
	defer end()
	if l.readOnly && dir&replicate.Push != 0 {
		return SyncResult{}, ErrReadOnly
	}
	if l.journal != nil && o.MetadataOnly {
		return SyncResult{}, ErrMetadataOnlyJournal
	}
	r := &run{v: v, t: v.newTracker(l.ID())}
	v.emit(Event{Kind: SyncStarted, Remote: l.ID(), Direction: dir})
	var res SyncResult
	if l.journal != nil {
		res, err = v.replicateJournal(ctx, l, dir, o, r)
	} else {
		res, err = v.replicateEndpoint(ctx, l, dir, o, r)
	}
	// What arrived is recorded even after a failure or cancellation.
	if herr := r.t.commit(context.WithoutCancel(ctx)); herr != nil && err == nil {
		err = herr
	}
	if err == nil && !o.Live {
		err = v.remember(ctx, l, dir, res)
	}
	v.emit(Event{Kind: SyncStopped, Remote: l.ID(), Direction: dir, Err: err})
	return res, err
}

// remember records a one-shot sync in the replica's memory of l.
func (v *Vault) remember(ctx context.Context, l *Link, dir replicate.Direction, res SyncResult) error {
	now := v.opts.Now()
	return v.updateRemote(ctx, l.ID(), func(s *RemoteState) {
		if dir&replicate.Pull != 0 {
			s.LastPull = now
			if res.Pull.LastSeq != "" {
				s.LastPullSeq = res.Pull.LastSeq
			}
		}
		if dir&replicate.Push != 0 {
			s.LastPush = now
			if res.Push.LastSeq != "" {
				s.LastPushSeq = res.Push.LastSeq
			}
		}
	})
}

// replicateEndpoint runs engine/replicate between the replica and l.
func (v *Vault) replicateEndpoint(ctx context.Context, l *Link, dir replicate.Direction, o SyncOptions, r *run) (SyncResult, error) {
	node, err := v.NodeID(ctx)
	if err != nil {
		return SyncResult{}, err
	}
	written := func(d replicate.Direction) func(int) {
		return func(n int) { v.emit(Event{Kind: SyncWritten, Remote: l.ID(), Direction: d, Written: n}) }
	}
	var localEP, remoteEP engine.Endpoint = countWrites{v.st, written(replicate.Pull)}, countWrites{l.remote.Endpoint(), written(replicate.Push)}
	cfg := replicate.Config{Local: localEP, Remote: replicate.Transform(remoteEP, l.codec),
		LocalID: node, RemoteID: l.ID(), Log: v.log, ReadOnlyRemote: l.readOnly, Activity: v.act,
		Progress: func(p replicate.Progress) {
			r.commit(ctx)
			v.emit(Event{Kind: SyncProgress, Remote: l.ID(), Sync: &p, Direction: p.Direction})
		},
		OnRetry: func(x replicate.Retry) {
			r.commit(ctx)
			v.emit(Event{Kind: SyncRetrying, Remote: l.ID(), Direction: x.Direction, Retry: &Retry{Direction: x.Direction, What: x.What, Delay: x.Delay, Err: x.Err}})
		}}
	if dir&replicate.Pull != 0 {
		cfg.Holder, cfg.HoldSource, cfg.Arrivals = r, l.ID(), r
	}
	if o.MetadataOnly {
		cfg.Selector = replicate.ChunksOnlineSelector
	}
	rep, err := replicate.New(cfg)
	if err != nil {
		return SyncResult{}, err
	}
	defer rep.Close()
	if o.Live {
		return SyncResult{}, rep.Live(ctx, dir)
	}
	var res replicate.Result
	switch dir {
	case replicate.Pull:
		res, err = rep.Pull(ctx)
	case replicate.Push:
		res, err = rep.Push(ctx)
	default:
		res, err = rep.Sync(ctx)
	}
	return SyncResult{Result: res}, err
}

// countWrites reports the documents each bulk write stored (a live
// run's progress counts restart with every pass; these do not).
type countWrites struct {
	engine.Endpoint
	fn func(n int)
}

func (c countWrites) BulkDocs(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	res, err := c.Endpoint.BulkDocs(ctx, docs)
	if err == nil {
		n := 0
		for _, r := range res {
			if r.Error == "" {
				n++
			}
		}
		if n > 0 {
			c.fn(n)
		}
	}
	return res, err
}
