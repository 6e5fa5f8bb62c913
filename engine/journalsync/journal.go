package journalsync

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/journal"
)

// Journal synchronises a local store with a journal in an object store.
// It is safe for concurrent use: Receive, Send, Sync, ClearQuarantine and
// ResetCheckpoint run one at a time (a second call waits for the first),
// and the chunk source answers concurrently with them.
type Journal struct {
	cfg    Config
	prefix string
	cpID   string

	run chan struct{} // the run lock: one operation at a time

	loadMu sync.Mutex // serialises the first load of the checkpoint
	saveMu sync.Mutex // orders checkpoint writes: snapshot and write together
	mu     sync.Mutex // guards st
	st     *state     // nil until loaded

	src *source
}

// New returns a Journal for cfg. Nothing is read until the first
// operation.
func New(cfg Config) (*Journal, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	j := &Journal{
		cfg:    cfg,
		prefix: cfg.Remote.Prefix(),
		cpID:   CheckpointID(cfg.Remote.ID()),
		run:    make(chan struct{}, 1),
	}
	j.src = newSource(j)
	return j, nil
}

// CheckpointID returns the id of the _local document in Config.Local
// that holds this journal's checkpoint.
func (j *Journal) CheckpointID() string { return j.cpID }

// lock takes the run lock, or returns ctx's error.
func (j *Journal) lock(ctx context.Context) error {
	select {
	case j.run <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (j *Journal) unlock() { <-j.run }

// name returns a key relative to the bucket prefix, as the checkpoint
// records packs.
func (j *Journal) name(key string) string { return strings.TrimPrefix(key, j.prefix) }

// key returns the object key of a pack name.
func (j *Journal) key(name string) string { return j.prefix + name }

// state returns the loaded checkpoint, reading it on first use. The
// pointer never changes once loaded (a reset rewrites it in place); its
// fields are guarded by j.mu.
func (j *Journal) state(ctx context.Context) (*state, error) {
	j.mu.Lock()
	st := j.st
	j.mu.Unlock()
	if st != nil {
		return st, nil
	}
	j.loadMu.Lock()
	defer j.loadMu.Unlock()
	j.mu.Lock()
	st = j.st
	j.mu.Unlock()
	if st != nil {
		return st, nil
	}
	st, err := loadCheckpoint(ctx, j.cfg.Local, j.cpID)
	var ee *engine.Error
	switch {
	case err != nil && (errors.Is(err, engine.ErrMalformed) || errors.Is(err, engine.ErrUnsupported)) && !errors.As(err, &ee):
		return nil, &engine.Error{Op: "read journal checkpoint", DocID: j.cpID, Stage: engine.StageDecode,
			Err: fmt.Errorf("%w (ResetCheckpoint starts over)", err)}
	case err != nil:
		return nil, err
	case st == nil:
		st = newState()
	}
	j.mu.Lock()
	j.st = st
	j.mu.Unlock()
	return st, nil
}

// save writes the checkpoint (see state.plan): plans are made and
// written in order, so a later write never carries an older state, and
// a segment is written before the head that counts it.
func (j *Journal) save(ctx context.Context) error {
	j.saveMu.Lock()
	defer j.saveMu.Unlock()
	j.mu.Lock()
	if j.st == nil {
		j.mu.Unlock()
		return nil
	}
	p := j.st.plan(j.cpID)
	j.mu.Unlock()
	if p.seg != nil {
		if err := j.cfg.Local.PutLocal(ctx, p.segID, p.seg); err != nil {
			return fmt.Errorf("journalsync: save checkpoint: %w", err)
		}
	}
	if err := j.cfg.Local.PutLocal(ctx, j.cpID, p.head); err != nil {
		return fmt.Errorf("journalsync: save checkpoint: %w", err)
	}
	j.mu.Lock()
	j.st.commit(p)
	j.mu.Unlock()
	return nil
}

// Receive applies the packs of the journal this device has not received
// yet, in key order, inside the finite activity boundary. See the package
// documentation for what it does with each pack.
func (j *Journal) Receive(ctx context.Context) (Result, error) {
	return j.operation(ctx, "journal receive", true, func(ctx context.Context, res *Result) error {
		return j.receive(ctx, res)
	})
}

// Send packs the local changes since the last sent pack that did not come
// from the journal, and uploads them, inside the bounded activity
// boundary (it delivers nothing locally).
func (j *Journal) Send(ctx context.Context) (Result, error) {
	return j.operation(ctx, "journal send", false, func(ctx context.Context, res *Result) error {
		return j.send(ctx, res)
	})
}

// Sync receives, then sends only if receiving succeeded ("always start by
// receiving", engine/FORMAT.md §6.4), both inside one finite activity boundary.
func (j *Journal) Sync(ctx context.Context) (Result, error) {
	return j.operation(ctx, "journal sync", true, func(ctx context.Context, res *Result) error {
		if err := j.receive(ctx, res); err != nil {
			return err
		}
		return j.send(ctx, res)
	})
}

func (j *Journal) operation(ctx context.Context, label string, finite bool, fn func(context.Context, *Result) error) (Result, error) {
	if err := j.lock(ctx); err != nil {
		return Result{}, err
	}
	defer j.unlock()
	var res Result
	body := func(ctx context.Context) error {
		if _, err := j.state(ctx); err != nil {
			return err
		}
		if err := j.checkEpoch(ctx); err != nil {
			return err
		}
		return fn(ctx, &res)
	}
	var err error
	switch {
	case j.cfg.Activity == nil:
		err = body(ctx)
	case finite:
		err = j.cfg.Activity.RunFinite(ctx, label, body)
	default:
		err = j.cfg.Activity.RunBounded(ctx, label, body)
	}
	return res, err
}

// checkEpoch follows commonlib JournalSyncCore.ts
// ensureCheckpointCachesAreFresh: when Config.Epoch differs from the
// recorded epoch, the newest pack this device sent decides whether the
// bucket was wiped (it is gone) or not (it is still listed); a wipe
// clears what this device knew of the bucket. Unlike upstream, a failed
// probe is returned as an error instead of being taken as a wipe, so a
// passing network fault never makes the device resend everything.
func (j *Journal) checkEpoch(ctx context.Context) error {
	if j.cfg.Epoch == "" {
		return nil
	}
	j.mu.Lock()
	same := j.st.epoch == j.cfg.Epoch
	known := j.st.epoch != ""
	lastSent := j.st.maxSent
	j.mu.Unlock()
	if same && !(j.cfg.ResendAfterWipe && lastSent != "") {
		return nil
	}
	wiped := false
	switch {
	case same:
		// The same sync parameters, but a replica that must refill the
		// bucket also checks that the newest pack it sent is still
		// there: packs deleted while the parameters stayed (a partial
		// wipe, a restore of an older copy) are a wipe too. One listing
		// from that key per run.
		target := j.key(lastSent)
		keys, err := j.cfg.Remote.List(ctx, target[:len(target)-1])
		if err != nil {
			return err
		}
		if slices.Contains(keys, target) {
			return nil
		}
		wiped = true
	case j.cfg.ResendAfterWipe && known && lastSent != "":
		// No probe: a wipe in progress may not have reached the last
		// pack yet, and packs sealed under the old salt are lost to
		// devices on the new one anyway.
		wiped = true
	case lastSent != "":
		target := j.key(lastSent)
		keys, err := j.cfg.Remote.List(ctx, target[:len(target)-1])
		if err != nil {
			return err
		}
		wiped = !slices.Contains(keys, target)
	}
	j.mu.Lock()
	switch {
	case wiped && j.cfg.ResendAfterWipe:
		j.st.reset()
	case wiped:
		j.st.wipe()
	}
	j.st.epoch = j.cfg.Epoch
	j.mu.Unlock()
	if wiped {
		j.cfg.Log.Warn("journalsync: the last sent pack is gone (the journal epoch changed, or the packs were deleted): the bucket was wiped; starting over",
			"source", j.cfg.Remote.ID(), "last_sent", lastSent, "resend", j.cfg.ResendAfterWipe)
		j.src.reset()
		if j.cfg.OnWipe != nil {
			j.cfg.OnWipe()
		}
	} else {
		j.cfg.Log.Info("journalsync: journal epoch changed; the bucket still holds the last sent pack, bookkeeping kept",
			"source", j.cfg.Remote.ID())
	}
	return j.save(ctx)
}

// SentThrough is the local sequence the last Send packed changes
// through (the checkpoint's lastLocalSeq): the local changes after it
// are not in the bucket yet. It is "" before the checkpoint is loaded or
// anything was sent.
func (j *Journal) SentThrough() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.st == nil {
		return ""
	}
	return j.st.lastLocalSeq
}

// Quarantined returns the packs currently quarantined, in key order.
func (j *Journal) Quarantined(ctx context.Context) ([]Quarantine, error) {
	st, err := j.state(ctx)
	if err != nil {
		return nil, err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make([]Quarantine, 0, len(st.quarantine))
	for name, q := range st.quarantine {
		out = append(out, Quarantine{Key: j.key(name), Stage: q.Stage, Err: q.Error, At: q.At})
	}
	slices.SortFunc(out, func(a, b Quarantine) int { return journal.ComparePackKeys(a.Key, b.Key) })
	return out, nil
}

// ClearQuarantine releases quarantined packs (by object key, as in
// Quarantine.Key; none means all) so that the next Receive tries them
// again once. Keys that are not quarantined are ignored.
func (j *Journal) ClearQuarantine(ctx context.Context, keys ...string) error {
	if err := j.lock(ctx); err != nil {
		return err
	}
	defer j.unlock()
	st, err := j.state(ctx)
	if err != nil {
		return err
	}
	j.mu.Lock()
	if len(keys) == 0 {
		for name := range st.quarantine {
			keys = append(keys, j.key(name))
		}
	}
	changed := false
	for _, k := range keys {
		name := j.name(k)
		if _, ok := st.quarantine[name]; ok {
			delete(st.quarantine, name)
			st.retry[name] = struct{}{}
			changed = true
		}
	}
	j.mu.Unlock()
	j.src.forgetUnreadable()
	if !changed {
		return nil
	}
	return j.save(ctx)
}

// ResetCheckpoint replaces the checkpoint with an empty one: the next
// Receive applies every pack again (harmless: documents already stored
// are skipped) and the next Send packs every local change that is not
// in a received pack. Use it when the checkpoint cannot be read.
func (j *Journal) ResetCheckpoint(ctx context.Context) error {
	if err := j.lock(ctx); err != nil {
		return err
	}
	defer j.unlock()
	j.loadMu.Lock() // no load in progress may install the old checkpoint
	defer j.loadMu.Unlock()
	j.mu.Lock()
	if j.st == nil {
		j.st = newState()
		j.st.needBase = true
	} else {
		j.st.reset() // in place: the pointer stays valid
	}
	j.mu.Unlock()
	j.src.reset()
	return j.save(ctx)
}
