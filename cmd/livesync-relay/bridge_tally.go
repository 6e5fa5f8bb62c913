package main

import (
	"sync"

	ebridge "github.com/livesync-go/livesync-go/engine/bridge"
)

// bridgeTally keeps what /status and /metrics count of each database's
// bridges since the relay started. A database kept on CouchDB is bridged
// by one relay at a time, the leader: this relay builds a new bridge each
// time it becomes the leader and stops it when it stops being one, and a
// new bridge counts from zero. The tally adds the counters of the
// bridges that ran before (retired) to the newest one's, so that the
// counters only grow and the maxima are over the relay's lifetime.
type bridgeTally struct {
	mu  sync.Mutex
	dbs map[string]*dbTally
}

// dbTally is one database's bridges: the newest (running or stopped)
// and the sums of the retired ones.
type dbTally struct {
	last    *ebridge.Bridge
	sources map[string]ebridge.SourceStatus   // by throttle key
	ups     map[string]ebridge.UpstreamStatus // by upstream name: Resets, DocsPulled, DocsPushed, Errors
	hunt    ebridge.HuntStatus                // Completed, Removed, Hedges, MemoHits
}

func newBridgeTally() *bridgeTally { return &bridgeTally{dbs: map[string]*dbTally{}} }

// built records b, the database's new bridge. The previous one was
// stopped before (a relay leads once at a time): its final counters are
// added to the retired sums.
func (t *bridgeTally) built(db string, b *ebridge.Bridge) {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := t.dbs[db]
	if d == nil {
		d = &dbTally{sources: map[string]ebridge.SourceStatus{}, ups: map[string]ebridge.UpstreamStatus{}}
		t.dbs[db] = d
	}
	if d.last != nil && d.last != b {
		ups, hs := d.last.Snapshot()
		d.fold(ups, hs)
	}
	d.last = b
}

// fold adds a retired bridge's counters to the sums.
func (d *dbTally) fold(ups []ebridge.UpstreamStatus, hs ebridge.HuntStatus) {
	seen := map[string]bool{}
	for _, u := range ups {
		r := d.ups[u.Name]
		r.Resets += u.Resets
		r.DocsPulled += u.DocsPulled
		r.DocsPushed += u.DocsPushed
		r.Errors += u.Errors
		d.ups[u.Name] = r
		if k := u.Hunt.ThrottleKey; !seen[k] {
			seen[k] = true
			s := d.sources[k]
			addSource(&s, u.Hunt)
			d.sources[k] = s
		}
	}
	d.hunt.Completed += hs.Completed
	d.hunt.Removed += hs.Removed
	d.hunt.Hedges += hs.Hedges
	d.hunt.MemoHits += hs.MemoHits
}

// addSource adds src's counters to s and keeps the larger maxima.
func addSource(s *ebridge.SourceStatus, src ebridge.SourceStatus) {
	s.Requests += src.Requests
	s.Found += src.Found
	s.Missing += src.Missing
	s.Failed += src.Failed
	s.Canceled += src.Canceled
	s.Chunks += src.Chunks
	s.MaxInFlight = max(s.MaxInFlight, src.MaxInFlight)
	s.MaxInWindow = max(s.MaxInWindow, src.MaxInWindow)
	s.MaxWaitSeconds = max(s.MaxWaitSeconds, src.MaxWaitSeconds)
}

// bridgeView is a database's bridging as /status and /metrics show it.
type bridgeView struct {
	ups  []ebridge.UpstreamStatus
	hunt ebridge.HuntStatus
	// b is the newest bridge (for SourceName and Up); running says it
	// is the database's bridge now (false: this relay stopped leading).
	b       *ebridge.Bridge
	running bool
}

// up reports upstream i replicating now.
func (v *bridgeView) up(i int) bool { return v.running && v.b.Up(i) }

// view returns the database's bridging with the retired bridges'
// counters added; current is the database's bridge now (nil while
// another relay leads). ok is false when the database never had one.
func (t *bridgeTally) view(db string, current *ebridge.Bridge) (v bridgeView, ok bool) {
	t.mu.Lock()
	d := t.dbs[db]
	if d == nil || d.last == nil {
		t.mu.Unlock()
		return bridgeView{}, false
	}
	// A copy of the sums, so that the snapshot (it may ask the store)
	// runs without the lock.
	last, sums := d.last, d.copySums()
	t.mu.Unlock()
	v.b, v.running = last, current == last
	v.ups, v.hunt = last.Snapshot()
	sums.addTo(v.ups, &v.hunt, v.running)
	return v, true
}

// copySums copies the retired bridges' sums.
func (d *dbTally) copySums() *dbTally {
	c := &dbTally{hunt: d.hunt, sources: make(map[string]ebridge.SourceStatus, len(d.sources)),
		ups: make(map[string]ebridge.UpstreamStatus, len(d.ups))}
	for k, u := range d.ups {
		c.ups[k] = u
	}
	for k, s := range d.sources {
		c.sources[k] = s
	}
	return c
}

// addTo adds the retired bridges' sums to the newest bridge's snapshot;
// a bridge that no longer runs shows its upstreams stopped.
func (d *dbTally) addTo(ups []ebridge.UpstreamStatus, hs *ebridge.HuntStatus, running bool) {
	for i := range ups {
		u := &ups[i]
		if !running {
			u.State = ebridge.StateStopped
		}
		r := d.ups[u.Name]
		u.Resets += r.Resets
		u.DocsPulled += r.DocsPulled
		u.DocsPushed += r.DocsPushed
		u.Errors += r.Errors
		addSource(&u.Hunt, d.sources[u.Hunt.ThrottleKey])
	}
	hs.Completed += d.hunt.Completed
	hs.Removed += d.hunt.Removed
	hs.Hedges += d.hunt.Hedges
	hs.MemoHits += d.hunt.MemoHits
}
