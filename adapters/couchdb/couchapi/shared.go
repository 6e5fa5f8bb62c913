package couchapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/bridge"
	"github.com/livesync-go/livesync-go/engine/docid"
	"github.com/livesync-go/livesync-go/engine/holdback"
	"github.com/livesync-go/livesync-go/engine/hunt"
	"github.com/livesync-go/livesync-go/engine/lease"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/purgatory"
	"github.com/livesync-go/livesync-go/engine/store"
)

// SharedConfig says how a database shared with other relays (a CouchDB
// store) is coordinated.
//
// The lease's TTL must be much larger than the difference between the
// relays' clocks (the lease's expiry is a wall-clock instant written by
// one relay and read by the others) and than a round trip to the store.
type SharedConfig struct {
	LeaseTTL time.Duration // 0 means lease.DefaultTTL
	Refresh  time.Duration // 0 means DefaultSharedRefresh
	Holder   string        // this relay's name in the lease; "" means host-pid-random
}

// DefaultSharedRefresh is how often a shared database's hold-back
// adopts the holds other relays made (SharedConfig.Refresh).
const DefaultSharedRefresh = 2 * time.Second

// SharedStatus is a shared database's coordination state.
type SharedStatus struct {
	// Leader says whether this relay holds the lease: it alone runs the
	// database's bridge (upstreams and hunt) and saves the purgatory.
	Leader bool
	// Self is this relay's name in the lease.
	Self string
	// Holder is the relay that holds the lease as last seen ("" when it
	// is free or could not be read).
	Holder string
	// LeaseUntil is when the lease ends unless renewed, as last seen
	// (zero when free or unknown).
	LeaseUntil time.Time
	// Takeovers counts the times this relay gained the lease.
	Takeovers uint64
	// Refreshes counts the hold-back's successful refreshes from the
	// shared holding area.
	Refreshes uint64
	// Arrivals counts the chunk ids the changes feed handed to the
	// hold-back.
	Arrivals uint64
	// LastError is what fails now (the lease, the feed or the refresh,
	// "; "-separated), "" when everything works.
	LastError string
	// LastErrorAt is when the latest failure happened (zero if none ever
	// did).
	LastErrorAt time.Time
}

// SharedStatus returns the coordination state of a shared database; nil
// for one that is not shared.
func (d *HeldDatabase) SharedStatus() *SharedStatus {
	if d.shared == nil {
		return nil
	}
	return d.shared.snapshot()
}

// Timing of the shared runner. Variables only so that tests may change
// them.
var (
	// sharedMinRetry and sharedMaxRetry bound the doubling delay before
	// the changes feed is followed again after a failure; sharedMinRetry
	// is also the least time between two feed requests that returned
	// nothing.
	sharedMinRetry = time.Second
	sharedMaxRetry = 30 * time.Second
	// sharedCloseTimeout bounds giving up the lease on Close.
	sharedCloseTimeout = 10 * time.Second
)

const (
	// feedPage caps the changes of one feed request.
	feedPage = 1000
	// maxLeaseState is the largest hunt state saved in the lease
	// document, which is written at every renewal. Beyond it the
	// documents' backoff is left out (the per-source windows and memos,
	// which keep the limits global, are small), and beyond it again the
	// state is left empty.
	maxLeaseState = 1 << 20
)

// sharedRunner coordinates one database that this relay shares with
// others through its store: it follows the store's changes feed so that
// chunks written through any relay release the notes held here, refreshes
// the hold-back from the shared holding area, and runs the lease whose
// holder alone bridges the database (upstreams and hunt).
//
// Three goroutines: the feed, the refresh ticker and the lease loop. Only
// the lease loop (and close, after it ended) changes the leadership and
// the bridge; mu guards what other goroutines read of them.
type sharedRunner struct {
	name    string
	served  *holdback.Served
	inner   store.Store
	lease   *lease.Lease
	build   func(name string, local bridge.Local, log *slog.Logger) (*bridge.Bridge, error)
	log     *slog.Logger
	ttl     time.Duration
	refresh time.Duration

	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error

	// Owned by the lease loop, then by close.
	leader  bool      // this relay bridges the database
	held    bool      // the lease may be this relay's (taken, not yet lost or released)
	renewed time.Time // the last successful Acquire or Renew
	demote  bool      // SetHunter(nil, false) failed and is due again

	mu     sync.Mutex
	bridge *bridge.Bridge
	status SharedStatus
	errs   map[string]string // what fails now, by activity
	vault  [2]string         // the sync parameters and the milestone as last read
}

// serveShared serves a database shared with other relays: its hold-back
// is Shared and has no hunter until this relay holds the lease, and the
// runner coordinates it (see sharedRunner).
func (h *HeldDatabases) serveShared(ctx context.Context, name string, inner store.Store, sc SharedConfig, log *slog.Logger) (*HeldDatabase, error) {
	lu, ok := inner.(store.LocalUpdater)
	if !ok {
		return nil, fmt.Errorf("database %q is shared with other relays, but its store cannot update _local documents atomically", name)
	}
	info, err := inner.Info(ctx) // the feed starts here: the hold-back resumes what came before
	if err != nil {
		return nil, fmt.Errorf("database %q: %w", name, err)
	}
	if sc.LeaseTTL <= 0 {
		sc.LeaseTTL = lease.DefaultTTL
	}
	if sc.Refresh <= 0 {
		sc.Refresh = DefaultSharedRefresh
	}
	if sc.Holder == "" {
		sc.Holder = defaultHolder()
	}
	r := &sharedRunner{name: name, inner: inner, build: h.cfg.Bridge, log: log.With("holder", sc.Holder),
		ttl: sc.LeaseTTL, refresh: sc.Refresh, errs: map[string]string{},
		lease: lease.New(lu, lease.Config{Holder: sc.Holder, TTL: sc.LeaseTTL})}
	r.status.Self = sc.Holder
	r.vault, _ = r.readVault(ctx)
	r.served = holdback.NewServed(ctx, inner, holdback.ServedConfig{Name: name, Holdback: h.cfg.Holdback,
		Passphrase: h.cfg.Passphrases[name], Owner: UserFrom, Log: log, Shared: true})
	hooks := holdback.ServedHooks{ParamsChanged: r.paramsChanged, SettingsChanged: r.settingsChanged}
	if err := r.served.Open(hooks); err != nil {
		return nil, err
	}
	r.ctx, r.cancel = context.WithCancel(context.WithoutCancel(ctx))
	r.wg.Go(func() { r.follow(info.UpdateSeq) })
	r.wg.Go(r.refreshLoop)
	r.wg.Go(r.leaseLoop)
	return &HeldDatabase{Served: r.served, Name: name, shared: r}, nil
}

// defaultHolder names this process in a lease: its host, its pid and a
// random part (a restarted relay is another holder).
func defaultHolder() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "relay"
	}
	b := make([]byte, 4)
	rand.Read(b)
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
}

// currentBridge is the bridge this relay runs now (nil when it is not
// the leader, or the database has no upstreams).
func (r *sharedRunner) currentBridge() *bridge.Bridge {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bridge
}

func (r *sharedRunner) snapshot() *SharedStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.status
	s.LastError = ""
	for _, k := range slices.Sorted(maps.Keys(r.errs)) {
		if s.LastError != "" {
			s.LastError += "; "
		}
		s.LastError += k + ": " + r.errs[k]
	}
	return &s
}

// fail records that activity failed with err, and logs it when it is a
// new failure.
func (r *sharedRunner) fail(activity string, err error) {
	r.mu.Lock()
	prev, had := r.errs[activity]
	r.errs[activity] = err.Error()
	r.status.LastErrorAt = time.Now()
	r.mu.Unlock()
	if !had || prev != err.Error() {
		r.log.Warn("shared database: "+activity+" failed", "err", err)
	}
}

// ok records that activity works again.
func (r *sharedRunner) ok(activity string) {
	r.mu.Lock()
	_, had := r.errs[activity]
	delete(r.errs, activity)
	r.mu.Unlock()
	if had {
		r.log.Info("shared database: " + activity + " works again")
	}
}

// sleep waits d or until the runner stops (false).
func (r *sharedRunner) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-r.ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// follow follows the store's changes feed from since and hands the ids
// of the chunks that arrive (written through any relay, or replicated
// from an upstream by the leader) to the hold-back, then writes the
// releases they made due. It reconnects after failures with a doubling
// delay.
func (r *sharedRunner) follow(since string) {
	delay := sharedMinRetry
	for r.ctx.Err() == nil {
		started := time.Now()
		page, err := r.inner.Changes(r.ctx, engine.ChangesRequest{Since: since, Limit: feedPage, Wait: true})
		if err != nil {
			if r.ctx.Err() != nil {
				return
			}
			r.fail("changes feed", err)
			if !r.sleep(delay) {
				return
			}
			delay = min(delay*2, sharedMaxRetry)
			continue
		}
		r.ok("changes feed")
		delay = sharedMinRetry
		if ids := chunkIDs(page.Results); len(ids) > 0 {
			r.served.ChunksArrived(ids)
			r.mu.Lock()
			r.status.Arrivals += uint64(len(ids))
			r.mu.Unlock()
			if err := r.served.Settle(r.ctx); err != nil && r.ctx.Err() == nil {
				r.log.Warn("shared database: writing the releases of arrived chunks failed; the hold-back retries", "err", err)
			}
		}
		if page.LastSeq != "" {
			since = page.LastSeq
		}
		// A store whose long poll returns at once with nothing is not
		// asked again in a tight loop.
		if len(page.Results) == 0 {
			if wait := sharedMinRetry - time.Since(started); wait > 0 && !r.sleep(wait) {
				return
			}
		}
	}
}

// chunkIDs are the ids of the chunks among changes (deleted ones left
// out).
func chunkIDs(changes []engine.Change) []engine.ChunkID {
	var ids []engine.ChunkID
	for _, c := range changes {
		if !c.Deleted && docid.IsChunkID(c.ID) {
			ids = append(ids, c.ID)
		}
	}
	return ids
}

// refreshLoop refreshes the hold-back from the shared holding area every
// refresh period, and looks whether another relay's client changed the
// vault's settings.
func (r *sharedRunner) refreshLoop() {
	t := time.NewTicker(r.refresh)
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(r.ctx, r.ttl)
		err := r.served.Refresh(ctx)
		cancel()
		if err != nil {
			if r.ctx.Err() != nil {
				return
			}
			r.fail("refresh", err)
			continue
		}
		r.ok("refresh")
		r.mu.Lock()
		r.status.Refreshes++
		r.mu.Unlock()
		r.checkVault()
	}
}

// leaseLoop takes the lease at once and then every TTL/3 while another
// relay holds it, and renews it every TTL/3 while this relay does.
func (r *sharedRunner) leaseLoop() {
	period := r.ttl / 3
	for {
		if r.demote {
			r.setFollower()
		}
		if r.leader {
			r.renew()
		} else {
			r.acquire()
		}
		if !r.sleep(period) {
			return
		}
	}
}

// leaseCtx bounds one request of the lease loop, so that a store that
// hangs cannot keep a leader from noticing in time that it cannot renew.
func (r *sharedRunner) leaseCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.ctx, r.ttl/3)
}

// hookCtx bounds a rebuild of the hold-back (SetHunter), which reads the
// holding area and waits for a Refresh in progress: a store that hangs
// must not stop the lease loop for good. A Refresh is bounded alike.
func (r *sharedRunner) hookCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.ctx, r.ttl)
}

// acquire takes the lease if it is free, expired or this relay's, and
// then becomes the leader.
func (r *sharedRunner) acquire() {
	ctx, cancel := r.leaseCtx()
	defer cancel()
	g, err := r.lease.Take(ctx)
	if err != nil {
		if r.ctx.Err() == nil {
			r.fail("lease", err)
		}
		return
	}
	r.ok("lease")
	if !g.Held {
		holder, until, err := r.lease.Info(ctx)
		if err != nil {
			holder, until = "", time.Time{}
		}
		r.mu.Lock()
		r.status.Holder, r.status.LeaseUntil = holder, until
		r.mu.Unlock()
		return
	}
	r.held, r.renewed = true, time.Now()
	r.lead(g.State, g.Unclean)
}

// lead makes this relay the leader: it builds the bridge, restores the
// hunt's state the last leader saved, hooks the hunt into the hold-back
// (which hands it every held note) and starts the bridge. When that
// fails the lease is given up, so that another relay may lead.
//
// After an unclean takeover (the last leader's lease ran out, it never
// released it) the requests that leader's hunt made since it last saved
// its state are unknown; it made none after its lease ran out, which is
// no later than now. The hunt therefore counts every source's window as
// full from now, and asks no source for one hunt window: the per-source
// limits hold across the handover at the cost of that wait.
func (r *sharedRunner) lead(state json.RawMessage, unclean bool) {
	var b *bridge.Bridge
	if r.build != nil {
		var err error
		if b, err = r.build(r.name, r.served, r.log); err != nil {
			r.fail("bridge", err)
			r.giveUp()
			return
		}
	}
	var h purgatory.Hunter
	if b != nil {
		r.restore(b.Hunt(), state)
		if unclean {
			b.Hunt().Saturate(r.renewed)
			r.log.Info("the last leader did not release the lease: the hunt asks no source for one hunt window")
		}
		h = b.Hunt()
	}
	ctx, cancel := r.hookCtx()
	defer cancel()
	if err := r.served.SetHunter(ctx, h, true); err != nil {
		if b != nil {
			b.Close()
		}
		if r.ctx.Err() == nil {
			r.fail("bridge", fmt.Errorf("hooking the hunt into the hold-back: %w", err))
		}
		r.giveUp()
		return
	}
	r.ok("bridge")
	r.leader = true
	r.mu.Lock()
	r.bridge = b
	r.status.Leader = true
	r.status.Takeovers++
	r.status.Holder, r.status.LeaseUntil = r.status.Self, r.renewed.Add(r.ttl)
	r.mu.Unlock()
	if b != nil {
		b.Start()
	}
	r.log.Info("this relay took the database's lease: it runs the upstreams and the hunt", "ttl", r.ttl)
}

// giveUp releases the lease after a failed takeover, keeping the saved
// state.
func (r *sharedRunner) giveUp() {
	ctx, cancel := r.leaseCtx()
	defer cancel()
	if err := r.lease.Release(ctx, nil); err != nil && r.ctx.Err() == nil {
		r.log.Warn("shared database: releasing the lease after a failed takeover", "err", err)
	}
	r.held = false
}

// restore seeds the hunt with the state the last leader saved in the
// lease (nothing when there is none or it does not parse: the limits
// then only start again).
func (r *sharedRunner) restore(h *hunt.Hunt, raw json.RawMessage) {
	if len(raw) == 0 || string(raw) == "null" {
		return
	}
	var st hunt.State
	if err := json.Unmarshal(raw, &st); err != nil {
		r.log.Warn("shared database: the hunt state in the lease does not parse; the hunt starts afresh", "err", err)
		return
	}
	h.Restore(st)
}

// renew extends the lease with the hunt's current state. When another
// relay took it, or it could not be renewed for so long that it would
// run out before the next attempt, this relay stops leading.
func (r *sharedRunner) renew() {
	b := r.bridge // written only by this goroutine
	var st json.RawMessage
	if b != nil {
		st = r.huntState(b.Hunt())
	}
	ctx, cancel := r.leaseCtx()
	err := r.lease.Renew(ctx, st)
	cancel()
	now := time.Now()
	switch {
	case err == nil:
		r.ok("lease")
		r.renewed = now
		r.mu.Lock()
		r.status.Holder, r.status.LeaseUntil = r.status.Self, now.Add(r.ttl)
		r.mu.Unlock()
	case r.ctx.Err() != nil:
	case errors.Is(err, lease.ErrLost):
		r.held = false
		r.fail("lease", err)
		r.stepDown("another relay holds the lease")
	default:
		r.fail("lease", err)
		// Step down before the lease runs out rather than after: another
		// relay may take it over the moment it does.
		if !now.Add(r.ttl / 3).Before(r.renewed.Add(r.ttl)) {
			r.stepDown("the lease could not be renewed before it runs out")
		}
	}
}

// stepDown stops the bridge and leaves the hold-back without a hunter.
func (r *sharedRunner) stepDown(why string) {
	if b := r.bridge; b != nil {
		b.Stop() // before SetHunter: its runners may be writing through the hold-back
	}
	r.leader = false
	r.mu.Lock()
	r.bridge = nil
	r.status.Leader = false
	r.status.Holder, r.status.LeaseUntil = "", time.Time{}
	r.mu.Unlock()
	r.log.Warn("this relay no longer leads the database: its upstreams and hunt stopped", "why", why)
	r.setFollower()
}

// setFollower leaves the hold-back without a hunter, not saving the
// purgatory: the leader does. A failure is retried by the lease loop.
func (r *sharedRunner) setFollower() {
	ctx, cancel := r.hookCtx()
	defer cancel()
	if err := r.served.SetHunter(ctx, nil, false); err != nil {
		r.demote = r.ctx.Err() == nil
		if r.demote {
			r.fail("bridge", fmt.Errorf("unhooking the hunt from the hold-back: %w", err))
		}
		return
	}
	r.demote = false
	r.ok("bridge")
}

// huntState is the hunt's state as saved in the lease, within
// maxLeaseState.
func (r *sharedRunner) huntState(h *hunt.Hunt) json.RawMessage {
	st := h.State()
	raw, err := json.Marshal(st)
	if err == nil && len(raw) <= maxLeaseState {
		return raw
	}
	st.Docs = nil
	if raw, err = json.Marshal(st); err == nil && len(raw) <= maxLeaseState {
		r.log.Warn("shared database: the hunt state is too large for the lease; the documents' backoff is left out", "limit", maxLeaseState)
		return raw
	}
	r.log.Warn("shared database: the hunt state is too large for the lease; the next leader starts afresh", "limit", maxLeaseState)
	return json.RawMessage("{}")
}

// close stops the runner and the bridge, closes the hold-back (which
// saves the purgatory while this relay leads) and then gives the lease
// up with the hunt's last state, so that the next leader finds the
// purgatory saved.
func (r *sharedRunner) close() error {
	r.closeOnce.Do(func() {
		r.cancel()
		r.wg.Wait()
		var st json.RawMessage
		b := r.bridge
		if b != nil {
			st = r.huntState(b.Hunt())
			b.Stop()
		}
		err := r.served.Close()
		if r.held {
			ctx, cancel := context.WithTimeout(context.Background(), sharedCloseTimeout)
			defer cancel()
			// ErrLost: another relay took the lease after this one
			// stopped leading, and keeps its own state.
			if rerr := r.lease.Release(ctx, st); rerr != nil && !errors.Is(rerr, lease.ErrLost) {
				err = errors.Join(err, fmt.Errorf("releasing the lease: %w", rerr))
			} else if r.leader {
				r.log.Info("released the database's lease")
			}
		}
		r.held, r.leader = false, false
		r.mu.Lock()
		r.bridge = nil
		r.status.Leader = false
		r.mu.Unlock()
		r.closeErr = err
	})
	return r.closeErr
}

// paramsChanged and settingsChanged are the hold-back's hooks for a
// client's write of the sync parameters or the milestone through this
// relay: the bridge, if this relay runs it, reacts to them.
func (r *sharedRunner) paramsChanged(ctx context.Context) {
	if b := r.currentBridge(); b != nil {
		b.ParamsChanged(ctx)
	}
}

func (r *sharedRunner) settingsChanged() {
	if b := r.currentBridge(); b != nil {
		b.SettingsChanged()
	}
}

// readVault reads the sync parameters and the milestone as stored (""
// when absent), in one request when the store can.
func (r *sharedRunner) readVault(ctx context.Context) ([2]string, error) {
	var out [2]string
	ids := []string{negotiate.SyncParametersLocalID, negotiate.MilestoneLocalID}
	if lr, ok := r.inner.(store.LocalsReader); ok {
		got, err := lr.GetLocals(ctx, ids)
		if err != nil {
			return out, err
		}
		for i, id := range ids {
			out[i] = string(got[id])
		}
		return out, nil
	}
	for i, id := range ids {
		raw, err := r.inner.GetLocal(ctx, id)
		if errors.Is(err, engine.ErrNotFound) {
			continue
		}
		if err != nil {
			return out, err
		}
		out[i] = string(raw)
	}
	return out, nil
}

// checkVault tells the hold-back and the bridge (when this relay runs
// it) that a client of another relay wrote the sync parameters or the
// milestone: the hold-back adopts the vault's codec (the first client's
// salt), the bridge its new salt or settings.
func (r *sharedRunner) checkVault() {
	cur, err := r.readVault(r.ctx)
	if err != nil {
		return
	}
	r.mu.Lock()
	prev := r.vault
	r.vault = cur
	r.mu.Unlock()
	if cur != prev {
		r.served.VaultChanged(r.ctx)
	}
	if cur[0] != prev[0] {
		r.paramsChanged(r.ctx)
	}
	if cur[1] != prev[1] {
		r.settingsChanged()
	}
}
