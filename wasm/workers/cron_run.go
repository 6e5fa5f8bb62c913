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
	"github.com/livesync-go/livesync-go/engine/holdback"
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
	d, err := a.openBridged(work, m, db, st)
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
	rep.Upstreams, rep.Hunt = d.bridge.Snapshot()
	state := d.bridge.Hunt().State()
	if !d.gate.isOpen() {
		// The hunt never saw the held documents: their backoff is
		// still the one restored.
		keepDocs(&state, st)
	}
	d.bridge.Stop()
	// What is left of the run's caps is for settling and saving.
	m.closing.Store(true)
	defer m.closing.Store(false)
	settleErr := d.served.Settle(closing)
	stats := d.served.Stats()
	rep.Held, rep.Released = stats.Held, stats.Released
	closeErr := d.close() // the purgatory's state is saved here
	relErr := l.release(closing, &state)
	return rep, errors.Join(settleErr, closeErr, relErr)
}

// keepDocs adds to st the documents of saved it lacks.
func keepDocs(st *hunt.State, saved hunt.State) {
	for doc, ds := range saved.Docs {
		if _, ok := st.Docs[doc]; !ok {
			if st.Docs == nil {
				st.Docs = map[string]hunt.DocState{}
			}
			st.Docs[doc] = ds
		}
	}
}

// bridgedDB is a database a run opened: served through the hold-back
// whose hunter is the bridge's hunt, behind a gate.
type bridgedDB struct {
	dbs    *d1kv.Databases
	served *holdback.Served
	bridge *bridge.Bridge
	gate   *huntGate
}

// close stops the bridge, closes the hold-back (saving the purgatory's
// state) and the databases.
func (d *bridgedDB) close() error {
	return errors.Join(d.served.Close(), d.dbs.Close())
}

// openBridged opens db (creating it when missing) through a hold-back
// whose hunter is the bridge to db's upstreams (as the relay's
// couchapi.HeldDatabases does), with the hunt's state st restored, and
// starts the bridge. The held documents the purgatory restores wait at
// the gate until the upstreams are connected (cronWait): a hunt pass
// before that finds no source and backs off 20 s, most of a run.
func (a *app) openBridged(ctx context.Context, m *cronMeter, db string, st hunt.State) (*bridgedDB, error) {
	dbs, err := d1kv.NewDatabases(m, couchapi.StoreOptions(0))
	if err != nil {
		return nil, err
	}
	area := areaDatabases{dbs: dbs, x: m} // the holding area's writes merge with other isolates' (scope_area.go)
	inner, err := area.Open(ctx, db)
	if errors.Is(err, engine.ErrNotFound) {
		if err = dbs.Create(ctx, db); err == nil || errors.Is(err, couchapi.ErrExists) {
			inner, err = area.Open(ctx, db)
		}
	}
	if err != nil {
		dbs.Close()
		return nil, fmt.Errorf("opening the database: %w", err)
	}
	hc := a.s.hold.Holdback
	hc.Purgatory.PushedDelay = cronPushedDelay
	served := holdback.NewServed(ctx, inner, holdback.ServedConfig{Name: db, Holdback: hc,
		Passphrase: a.s.hold.Passphrases[db], Log: cronLog.With("db", db)})
	b, err := a.newCronBridge(db, served, m, cronLog.With("db", db))
	if err != nil {
		dbs.Close()
		return nil, err
	}
	b.Hunt().Restore(st)
	gate := &huntGate{h: b.Hunt()}
	hooks := holdback.ServedHooks{Hunter: gate, ParamsChanged: b.ParamsChanged, SettingsChanged: b.SettingsChanged, Stop: b.Stop}
	if err := served.Open(hooks); err != nil {
		b.Close()
		dbs.Close()
		return nil, err
	}
	b.Start()
	return &bridgedDB{dbs: dbs, served: served, bridge: b, gate: gate}, nil
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
	return bridge.New(local, bridge.Config{DB: db, UUID: a.s.cfg.UUID, Upstreams: ups, Hunt: hc, Log: log,
		BatchesLimit: cronBatchesLimit})
}

// cronWait runs until the upstreams caught up both ways and the hunt is
// quiet with every release written, or ctx ends. It opens the hunt's
// gate once every upstream is connected (or failed for good), waits for
// the hunt (which costs no query) and looks at the upstreams (a query
// or two for the push lag) at most every cronPoll. An upstream that
// failed for good (state error: credentials, a missing database,
// another salt) counts as done: waiting will not fix it.
func (a *app) cronWait(ctx context.Context, d *bridgedDB, l *lease) error {
	t := time.NewTicker(cronPoll)
	defer t.Stop()
	for {
		if time.Until(l.until) < leaseMargin/2 {
			if err := l.renew(ctx, time.Now(), a.cron.budget+leaseMargin); err != nil {
				return err
			}
		}
		ups, _ := d.bridge.Snapshot()
		if !d.gate.isOpen() && connected(ups) {
			d.gate.release()
		}
		if d.gate.isOpen() {
			if err := d.bridge.Hunt().Quiet(ctx); err != nil {
				return context.Cause(ctx)
			}
			// Releases the hunt made possible are written now, so that
			// the push sees them before the upstreams are looked at.
			if err := d.served.Settle(ctx); err != nil {
				return err
			}
			if ups, _ = d.bridge.Snapshot(); caughtUp(ups) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-t.C:
		}
	}
}

// connected reports whether every upstream finished its handshake (its
// hunt source can fetch) or failed for good.
func connected(ups []bridge.UpstreamStatus) bool {
	for _, u := range ups {
		if !u.Hunt.CanFetch && u.State != bridge.StateError {
			return false
		}
	}
	return true
}

// caughtUp reports whether every upstream is live with nothing left to
// replicate either way, or failed for good.
func caughtUp(ups []bridge.UpstreamStatus) bool {
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
