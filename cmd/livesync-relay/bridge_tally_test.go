package main

import (
	"testing"

	ebridge "github.com/livesync-go/livesync-go/engine/bridge"
)

// A database's counters only grow across the bridges it had (a shared
// database's bridge is rebuilt at each takeover): the retired bridges'
// counters are added once per throttle key, maxima are kept, and the
// upstreams of a bridge that stopped show stopped.
func TestBridgeTallyAddsRetiredBridges(t *testing.T) {
	src := func(found, chunks uint64, maxInFlight int) ebridge.SourceStatus {
		return ebridge.SourceStatus{ThrottleKey: "couch:5984", Requests: found + 1, Found: found, Missing: 1, Chunks: chunks,
			MaxInFlight: maxInFlight, MaxInWindow: maxInFlight * 2}
	}
	// Two upstreams share one throttle key: the key counts once.
	first := []ebridge.UpstreamStatus{
		{Name: "a", State: ebridge.StateLive, DocsPulled: 10, Errors: 1, Hunt: src(3, 30, 5)},
		{Name: "b", State: ebridge.StateLive, DocsPushed: 4, Hunt: src(3, 30, 5)},
	}
	d := &dbTally{sources: map[string]ebridge.SourceStatus{}, ups: map[string]ebridge.UpstreamStatus{}}
	d.fold(first, ebridge.HuntStatus{Completed: 2, Removed: 1, Hedges: 1})

	now := []ebridge.UpstreamStatus{
		{Name: "a", State: ebridge.StateLive, DocsPulled: 1, Hunt: src(2, 20, 3)},
		{Name: "b", State: ebridge.StateLive, Hunt: src(2, 20, 3)},
	}
	hs := ebridge.HuntStatus{Completed: 1, Hunting: 4}
	d.copySums().addTo(now, &hs, false)
	a, b := now[0], now[1]
	if a.State != ebridge.StateStopped || a.DocsPulled != 11 || a.Errors != 1 || b.DocsPushed != 4 {
		t.Errorf("upstreams %+v %+v", a, b)
	}
	for _, u := range now {
		if h := u.Hunt; h.Found != 5 || h.Chunks != 50 || h.Missing != 2 || h.Requests != 7 || h.MaxInFlight != 5 || h.MaxInWindow != 10 {
			t.Errorf("upstream %s hunt %+v", u.Name, h)
		}
	}
	if hs.Completed != 3 || hs.Removed != 1 || hs.Hedges != 1 || hs.Hunting != 4 {
		t.Errorf("hunt %+v", hs)
	}
	// A copy: adding to a snapshot leaves the sums as they were.
	if d.sources["couch:5984"].Found != 3 || d.ups["a"].DocsPulled != 10 {
		t.Errorf("the sums changed: %+v %+v", d.sources, d.ups)
	}
}
