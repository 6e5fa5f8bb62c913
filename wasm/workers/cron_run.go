//go:build !js || upstreams

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/bridge"
	"github.com/livesync-go/livesync-go/engine/hunt"
	"github.com/livesync-go/livesync-go/wasm/workers/d1kv"
)

func init() {
	runUpstreams = func(a *app, ctx context.Context) error {
		_, err := a.cronRun(ctx)
		return err
	}
}

// Timing of a run.
const (
	// leaseMargin is how long a lease outlives the run's budget: the time
	// a run may need to stop, settle and save after it.
	leaseMargin = time.Minute
	// closeTimeout bounds stopping, settling and saving a database.
	closeTimeout = 20 * time.Second
	// cronPoll is how often a run looks whether its upstreams caught up.
	cronPoll = time.Second
	// cronPushedDelay is the first-hunt delay of a revision a client
	// pushed. The relay waits 3 minutes for the client's chunks; a cron
	// run is the hunt's only chance until the next one, and the time
	// between runs already gave the client that chance.
	cronPushedDelay = time.Millisecond
)

// cronReport is what a run did with one database (for the tests and the
// log; it holds nothing secret).
type cronReport struct {
	DB string
	// Skipped says why the run left the database alone ("" when it ran).
	Skipped string
	// Ended says why it stopped: "caught up", "budget", "query budget",
	// "subrequest budget" or an error.
	Ended     string
	Upstreams []bridge.UpstreamStatus
	Hunt      bridge.HuntStatus
	// Held is the number of revisions still held after the run.
	Held     int
	Released uint64
	// Queries and Subrequests are the run's D1 queries and upstream
	// requests so far (every database's before this one included).
	Queries, Subrequests int64
}

// cronLog is the run's log (Workers keeps a scheduled event's console
// output); tests replace it.
var cronLog = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))

// cronRun bridges every database with upstreams, one after the other,
// for at most the budget altogether, and within the run's D1 query and
// subrequest caps: when either nears its cap, or the budget ends, the
// run stops what it does, settles and saves, and the next run goes on
// from there (replication checkpoints, the purgatory's and the hunt's
// state are in D1).
func (a *app) cronRun(ctx context.Context) ([]cronReport, error) {
	work, stop := context.WithTimeoutCause(ctx, a.cron.budget, errBudget)
	defer stop()
	work, windDown := context.WithCancelCause(work)
	defer windDown(nil)
	m := newCronMeter(a.x, a.cron.queries, a.cron.subrequests, windDown)
	var reports []cronReport
	var errs []error
	dbs := a.cron.dbs()
	for i, db := range dbs {
		if work.Err() != nil {
			reports = append(reports, cronReport{DB: db, Skipped: "the run's " + endReason(work)})
			continue
		}
		// Each database gets an equal share of the time left, so that
		// one that never catches up does not starve the others.
		share := work
		if dl, ok := work.Deadline(); ok && len(dbs)-i > 1 {
			var cancel context.CancelFunc
			share, cancel = context.WithTimeoutCause(work, time.Until(dl)/time.Duration(len(dbs)-i), errBudget)
			defer cancel()
		}
		rep, err := a.cronDatabase(ctx, share, m, db)
		rep.Queries, rep.Subrequests = m.queries.Load(), m.requests.Load()
		reports = append(reports, rep)
		if err != nil {
			errs = append(errs, fmt.Errorf("cron: database %q: %w", db, err))
		}
		cronLog.Info("cron run", "db", db, "skipped", rep.Skipped, "ended", rep.Ended, "held", rep.Held,
			"released", rep.Released, "queries", rep.Queries, "subrequests", rep.Subrequests)
	}
	return reports, errors.Join(errs...)
}

// Why a run winds down early.
var (
	errBudget            = errors.New("budget")
	errQueryBudget       = errors.New("query budget")
	errSubrequestBudget  = errors.New("subrequest budget")
	errUpstreamsCaughtUp = errors.New("caught up")
)

func endReason(ctx context.Context) string {
	if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) {
		return c.Error()
	}
	return "end"
}

// cronDatabase bridges db for as long as work lasts: it takes db's
// lease, opens db through the hold-back with a bridge as its hunter
// (couchapi.NewHeld, as the relay), restores the hunt's state, runs the
// bridge until the upstreams caught up both ways and the hunt is quiet,
// then saves the hunt's state, stops the bridge, settles the releases,
// closes (the purgatory's state is saved) and gives the lease up.
func (a *app) cronDatabase(ctx, work context.Context, m *cronMeter, db string) (cronReport, error) {
	rep := cronReport{DB: db}
	closing, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	l, err := takeLease(closing, m, db, newHolder(), time.Now(), a.cron.budget+leaseMargin)
	if errors.Is(err, errLeaseHeld) {
		rep.Skipped = err.Error()
		return rep, nil
	}
	if err != nil {
		return rep, err
	}
	st, err := loadHuntState(closing, m, db)
	if err != nil {
		return rep, errors.Join(err, l.release(closing, nil))
	}
	held, d, err := a.openBridged(work, m, db, st)
	if err != nil {
		return rep, errors.Join(err, l.release(closing, nil))
	}
	waitErr := a.cronWait(work, d, l)
	rep.Ended = endReason(work)
	if waitErr == nil {
		rep.Ended = errUpstreamsCaughtUp.Error()
	} else if work.Err() == nil {
		rep.Ended = waitErr.Error()
	}
	rep.Upstreams, rep.Hunt = d.Bridge.Snapshot()
	state := d.Bridge.Hunt().State()
	d.Bridge.Stop()
	settleErr := d.Settle(closing)
	stats := d.Stats()
	rep.Held, rep.Released = stats.Held, stats.Released
	closeErr := held.Close() // the purgatory's state is saved here
	relErr := l.release(closing, &state)
	return rep, errors.Join(settleErr, closeErr, relErr)
}

// openBridged opens db (creating it when missing) through a hold-back
// whose hunter is the bridge to db's upstreams, with the hunt's state st
// restored before the purgatory enqueues what it holds.
func (a *app) openBridged(ctx context.Context, m *cronMeter, db string, st hunt.State) (*couchapi.HeldDatabases, *couchapi.HeldDatabase, error) {
	dbs, err := d1kv.NewDatabases(m, couchapi.StoreOptions(0))
	if err != nil {
		return nil, nil, err
	}
	// d1kv.Databases keeps what it opened until it closes: the check
	// opens the store the hold-back will use.
	if _, err := dbs.Open(ctx, db); errors.Is(err, engine.ErrNotFound) {
		if err := dbs.Create(ctx, db); err != nil && !errors.Is(err, couchapi.ErrExists) {
			dbs.Close()
			return nil, nil, fmt.Errorf("creating the database: %w", err)
		}
	} else if err != nil {
		dbs.Close()
		return nil, nil, err
	}
	hc := a.s.hold
	hc.Holdback.Purgatory.PushedDelay = cronPushedDelay
	hc.Log = cronLog
	hc.Bridge = func(name string, local bridge.Local, log *slog.Logger) (*bridge.Bridge, error) {
		b, err := a.newCronBridge(name, local, m, log)
		if err != nil {
			return nil, err
		}
		b.Hunt().Restore(st)
		return b, nil
	}
	// The holding area's writes merge with other isolates' (scope_area.go).
	held := couchapi.NewHeld(areaDatabases{dbs: dbs, x: m}, hc)
	d, err := held.OpenHeld(ctx, db)
	if err != nil {
		held.Close()
		return nil, nil, err
	}
	return held, d, nil
}

// newCronBridge builds the bridge of db to its upstreams, as the relay
// does (cmd/livesync-relay/bridge.go), with HTTP requests counted
// against the run's subrequest cap.
func (a *app) newCronBridge(db string, local bridge.Local, m *cronMeter, log *slog.Logger) (*bridge.Bridge, error) {
	var ups []bridge.Upstream
	closeAll := func() {
		for _, u := range ups {
			u.Remote.Close()
		}
	}
	for _, s := range a.cron.upstreams[db] {
		cfg, err := couchdb.ParseURL(s.URL)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("upstream %q: %w", s.Name, err)
		}
		cfg.User, cfg.Password, cfg.HTTPClient = s.User, s.Password, m.client
		loc := couchdb.DatabaseURL(cfg)
		r, err := couchdb.NewRemote(cfg, couchdb.RemoteOptions{ID: loc})
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("upstream %q: %w", s.Name, err)
		}
		ups = append(ups, bridge.Upstream{Name: s.Name, Kind: bridge.KindCouchDB, Mode: s.Mode, Location: loc,
			Database: cfg.Database, ChunksOnline: s.ChunksOnline, ThrottleKey: r.DB().ThrottleKey(),
			Remote: r, Docs: r.DB()})
	}
	hc := hunt.Config{MaxInFlight: a.cron.huntInFlight, MaxPerWindow: a.cron.huntPerWindow, Window: a.cron.huntWindow}
	return bridge.New(local, bridge.Config{DB: db, UUID: a.s.cfg.UUID, Upstreams: ups, Hunt: hc, Log: log})
}

// cronWait runs until the upstreams caught up both ways and the hunt is
// quiet with every release written, or ctx ends. It waits for the hunt
// first (which costs no query) and looks at the upstreams (a query or two
// for the push lag) at most every cronPoll. An upstream that failed for
// good (state error: credentials, a missing database, another salt)
// counts as done: waiting will not fix it.
func (a *app) cronWait(ctx context.Context, d *couchapi.HeldDatabase, l *lease) error {
	t := time.NewTicker(cronPoll)
	defer t.Stop()
	for {
		if time.Until(l.until) < leaseMargin/2 {
			if err := l.renew(ctx, time.Now(), a.cron.budget+leaseMargin); err != nil {
				return err
			}
		}
		if err := d.Bridge.Hunt().Quiet(ctx); err != nil {
			return context.Cause(ctx)
		}
		// Releases the hunt made possible are written now, so that the
		// push sees them before the upstreams are looked at.
		if err := d.Settle(ctx); err != nil {
			return err
		}
		if caughtUp(d.Bridge) {
			return nil
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-t.C:
		}
	}
}

// caughtUp reports whether every upstream is live with nothing left to
// replicate either way, or failed for good.
func caughtUp(b *bridge.Bridge) bool {
	ups, _ := b.Snapshot()
	for _, u := range ups {
		switch {
		case u.State == bridge.StateError:
		case u.State != bridge.StateLive:
			return false
		case u.Mode != bridge.ModeSource && u.Lag != 0:
			return false
		}
	}
	return true
}
