package tests

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/tests/internal/faultnet"
)

// TestToxiRelayUpstream runs the livesync-relay binary with its CouchDB
// upstream behind toxiproxy (latency 20±10 ms up, slicer down).
func TestToxiRelayUpstream(t *testing.T) {
	t.Parallel()
	couchServer(t)
	bin := buildRelay(t)
	t.Run("Bridge", func(t *testing.T) { t.Parallel(); testToxiBridge(t, bin) })
	t.Run("Hunt", func(t *testing.T) { t.Parallel(); testToxiHunt(t, bin) })
}

// toxiUpstreamFault is one way the network to the upstream breaks while
// the relay replicates; heal undoes it.
type toxiUpstreamFault struct {
	name         string
	inject, heal func(t *testing.T, p *faultnet.Proxy)
}

var upstreamFaults = []toxiUpstreamFault{
	{"reset_peer", func(t *testing.T, p *faultnet.Proxy) { toxiMust(t, p.ResetPeer("fault", faultnet.Down, 0)) },
		func(t *testing.T, p *faultnet.Proxy) { toxiMust(t, p.Remove("fault")) }},
	{"black_hole", func(t *testing.T, p *faultnet.Proxy) { toxiMust(t, p.Timeout("fault", faultnet.Up, time.Second)) },
		func(t *testing.T, p *faultnet.Proxy) { toxiMust(t, p.Remove("fault")) }},
	{"cut_mid_body", func(t *testing.T, p *faultnet.Proxy) { toxiMust(t, p.CutAfter("fault", faultnet.Down, 512)) },
		func(t *testing.T, p *faultnet.Proxy) { toxiMust(t, p.Remove("fault")) }},
	{"server_gone", func(t *testing.T, p *faultnet.Proxy) { p.Cut() },
		func(t *testing.T, p *faultnet.Proxy) { toxiMust(t, p.Restore()) }},
}

// testToxiBridge: the upstream (mode sync) is broken four times in turn
// (a reset, a black hole closed after 1 s, answers cut off after 512
// bytes, the server gone and back); during each fault 8 notes are
// written on the upstream and 8 through the relay, and the fault lasts
// until the relay has counted an error. Afterwards every note is on both
// sides, read back byte for byte; both hold the same number of
// documents; and the relay's pull and push counters exceed the documents
// that crossed by at most one batch (100) per fault: what it re-sent after
// resuming from its checkpoints.
func testToxiBridge(t *testing.T, bin string) {
	ce := couchServer(t)
	b, codec, _ := upCouchClient(t, dbName(t))
	p := toxiProxy(t, hostOf(t, ce.url))
	toxiMust(t, p.Latency("latency", faultnet.Up, 20*time.Millisecond, 10*time.Millisecond))
	toxiMust(t, p.Slicer("slicer", faultnet.Down, 1024, 512, 50*time.Microsecond))
	r := upStartRelay(t, bin, "", upCouch(ce, "b", p.URL(), b.Name(), "sync", "LSGO_UP_B"), "LSGO_UP_B="+ce.password)
	r.waitUpstream(t, "b", upLive)

	texts := map[string]string{}
	var onB, onRelay []string
	docsB, docsRelay := 0, 0
	for i, f := range upstreamFaults {
		_, ups := r.status(t)
		errs := ups["b"].Errors
		f.inject(t, p)
		var fromB, fromRelay []json.RawMessage
		for k := range 8 {
			text := fmt.Sprintf("# %s %d\n%s", f.name, k, strings.Repeat(fmt.Sprintf("written on the upstream while %s, line %d\n", f.name, k), 40))
			meta, chunks, m, _ := upRemoteNote(t, codec, fmt.Sprintf("Toxi/B/%d-%02d.md", i, k), text)
			fromB = append(fromB, append(chunks, meta)...)
			texts[m.ID], onB = text, append(onB, m.ID)
			text = strings.ReplaceAll(text, "upstream", "relay")
			meta, chunks, m, _ = upRemoteNote(t, codec, fmt.Sprintf("Toxi/R/%d-%02d.md", i, k), text)
			fromRelay = append(fromRelay, append(chunks, meta)...)
			texts[m.ID], onRelay = text, append(onRelay, m.ID)
		}
		upPush(t, b, fromB)
		upPush(t, r.db, fromRelay)
		docsB, docsRelay = docsB+len(fromB), docsRelay+len(fromRelay)
		r.waitUpstream(t, "b", func(u upUpstream) bool { return u.Errors > errs })
		f.heal(t, p)
	}
	upWaitInFeed(t, r.db, onB, 60*time.Second)
	upWaitInFeed(t, b, onRelay, 60*time.Second)
	for _, id := range onB {
		if got := upReadNote(t, r.db, codec, id); got != texts[id] {
			t.Errorf("%s on the relay: %d bytes, want %d", id, len(got), len(texts[id]))
		}
	}
	for _, id := range onRelay {
		if got := upReadNote(t, b, codec, id); got != texts[id] {
			t.Errorf("%s on the upstream: %d bytes, want %d", id, len(got), len(texts[id]))
		}
	}
	var ub upUpstream
	upPoll(t, "the counters to settle", func() bool {
		_, ups := r.status(t)
		ub = ups["b"]
		return ub.DocsPulled >= uint64(docsB) && ub.DocsPushed >= uint64(docsRelay) && ub.State == "live"
	}, func() string { return fmt.Sprintf("%+v", ub) })
	rc, bc := rsDocCount(t, r.db), rsDocCount(t, b)
	t.Logf("after %d faults (%d errors counted): relay %d documents, upstream %d; pulled %d for %d written there, pushed %d for %d written here",
		len(upstreamFaults), ub.Errors, rc, bc, ub.DocsPulled, docsB, ub.DocsPushed, docsRelay)
	if rc != bc {
		t.Errorf("the relay holds %d documents, the upstream %d", rc, bc)
	}
	bound := uint64(100 * len(upstreamFaults))
	if ub.DocsPulled > uint64(docsB)+bound || ub.DocsPushed > uint64(docsRelay)+bound {
		t.Errorf("re-sent more than a batch per fault: pulled %d for %d, pushed %d for %d", ub.DocsPulled, docsB, ub.DocsPushed, docsRelay)
	}
}

// concurrency returns the most requests in flight at once and the most
// starts in any window of length w.
func (w *wireLog) concurrency(win time.Duration) (inFlight, inWindow int) {
	reqs := w.sorted()
	for i, r := range reqs {
		n, m := 1, 1
		for j := range reqs {
			if j != i && reqs[j].start.Before(r.start) && reqs[j].end.After(r.start) {
				n++
			}
		}
		for j := i + 1; j < len(reqs) && reqs[j].start.Sub(r.start) < win; j++ {
			m++
		}
		inFlight, inWindow = max(inFlight, n), max(inWindow, m)
	}
	return inFlight, inWindow
}

// testToxiHunt: 16 notes are pushed to the relay without their chunks,
// which are only on the upstream (mode source), reached through
// toxiproxy and, behind it, an HTTP proxy that records every chunk read
// at the source. The hunt runs with 2 requests in flight and 8 per 2 s
// per source, backoff 300-600 ms, while the network flaps every 150 ms
// between healthy, answers cut after 200 bytes, a black hole and the
// server gone. Every note is released with its full text, and the source
// never saw more than 2 chunk reads at once or 8 starts in 2 s (the
// relay's /status agrees). A 17th note whose chunks are nowhere stays
// held and invisible (not served, not in the feed) until its chunks are
// written to the upstream; then it is released.
func testToxiHunt(t *testing.T, bin string) {
	ce := couchServer(t)
	b, codec, _ := upCouchClient(t, dbName(t))
	h := toxiHTTP(t, ce.url)
	wire := newWireLog(h)
	p := toxiProxy(t, hostOf(t, h.URL()))
	toxiMust(t, p.Latency("latency", faultnet.Up, 20*time.Millisecond, 10*time.Millisecond))
	const maxInFlight, maxPerWindow, window = 2, 8, 2 * time.Second
	purg := fmt.Sprintf("pushed_delay = \"200ms\"\n\n[hunt]\nmax_in_flight = %d\nmax_per_window = %d\nwindow = %q\nbackoff_base = \"300ms\"\nbackoff_cap = \"600ms\"\nbatch_size = 10",
		maxInFlight, maxPerWindow, window.String())
	r := upStartRelay(t, bin, purg, upCouch(ce, "b", p.URL(), b.Name(), "source", "LSGO_UP_B"), "LSGO_UP_B="+ce.password)
	r.waitUpstream(t, "b", upLive)

	var metas, chunksOnB []json.RawMessage
	var ids []string
	texts := map[string]string{}
	for i := range 16 {
		text := fmt.Sprintf("# Hunted %d\n%s", i, strings.Repeat(fmt.Sprintf("a held note's line, note %d\n", i), 60))
		meta, chunks, m, _ := upRemoteNote(t, codec, fmt.Sprintf("Hunt/%02d.md", i), text)
		metas, chunksOnB, ids = append(metas, meta), append(chunksOnB, chunks...), append(ids, m.ID)
		texts[m.ID] = text
	}
	lateText := "# Late\n" + strings.Repeat("its chunks come later\n", 60)
	lateMeta, lateChunks, late, _ := upRemoteNote(t, codec, "Hunt/late.md", lateText)
	upPush(t, b, chunksOnB)

	stop := make(chan struct{})
	flapped := make(chan int)
	go toxiFlap(t, p, stop, flapped)
	upPush(t, r.db, append(metas, lateMeta))
	upWaitInFeed(t, r.db, ids, 60*time.Second)
	close(stop)
	t.Logf("the network flapped %d times while the hunt ran", <-flapped)
	for _, id := range ids {
		if got := upReadNote(t, r.db, codec, id); got != texts[id] {
			t.Errorf("%s: %d bytes, want %d", id, len(got), len(texts[id]))
		}
	}

	// The late note is held and invisible until its chunks exist.
	s, _ := r.status(t)
	if held := s.Databases[0].Held; len(held) != 1 || held[0].Doc != late.ID {
		t.Fatalf("held: %+v, want only %s", held, late.ID)
	}
	if docs, err := r.db.DocsByID(ctxT(t), []string{late.ID}); err != nil || len(docs) != 0 {
		t.Fatalf("the held note is served before its chunks exist: %v %v", docs, err)
	}
	if rows := feedIDs(t, r); rows[late.ID] {
		t.Fatalf("the held note is in the relay's feed before its chunks exist")
	}
	upPush(t, b, lateChunks)
	upWaitInFeed(t, r.db, []string{late.ID}, 30*time.Second)
	if got := upReadNote(t, r.db, codec, late.ID); got != lateText {
		t.Errorf("the late note: %d bytes, want %d", len(got), len(lateText))
	}

	// The hunt starts the next requests the moment a window frees, so
	// two starts a whole window apart at the relay may reach the source a
	// little closer: the latency toxic's jitter (±10 ms each), a new
	// connection's set-up through toxiproxy, scheduling. The source's
	// windows are measured 150 ms shorter.
	inFlight, inWindow := wire.concurrency(window - 150*time.Millisecond)
	_, ups := r.status(t)
	hb := ups["b"].Hunt
	t.Logf("at the source: %d chunk reads, at most %d at once and %d in %v; the relay counted %d requests (%d failed), at most %d in flight and %d in a window",
		len(wire.snapshot()), inFlight, inWindow, window, hb.Requests, hb.Failed, hb.MaxInFlight, hb.MaxInWindow)
	if inFlight > maxInFlight || hb.MaxInFlight > maxInFlight {
		t.Errorf("more than %d chunk reads at once: %d at the source, %d by the relay's count", maxInFlight, inFlight, hb.MaxInFlight)
	}
	if inWindow > maxPerWindow || hb.MaxInWindow > maxPerWindow {
		t.Errorf("more than %d chunk reads in %v: %d at the source, %d by the relay's count", maxPerWindow, window, inWindow, hb.MaxInWindow)
	}
}

// toxiFlap cycles the network to the upstream every 150 ms (healthy,
// answers cut after 200 bytes, healthy, a black hole, healthy, the
// server gone) until stop closes; it then heals it and sends how many
// faults it injected.
func toxiFlap(t *testing.T, p *faultnet.Proxy, stop <-chan struct{}, done chan<- int) {
	tick := time.NewTicker(150 * time.Millisecond)
	defer tick.Stop()
	step, faults := 0, 0
	heal := func() {
		for _, n := range p.Toxics() {
			if n == "flap" {
				_ = p.Remove("flap")
			}
		}
		_ = p.Restore()
	}
	for {
		select {
		case <-stop:
			heal()
			done <- faults
			return
		case <-tick.C:
		}
		heal()
		var err error
		switch step % 6 {
		case 1:
			err = p.CutAfter("flap", faultnet.Down, 200)
		case 3:
			err = p.Timeout("flap", faultnet.Up, time.Second)
		case 5:
			p.Cut()
		}
		if err != nil {
			t.Errorf("flap: %v", err)
		}
		if step%2 == 1 {
			faults++
		}
		step++
	}
}

// feedIDs is the set of ids in the relay database's changes feed.
func feedIDs(t *testing.T, r *upRelay) map[string]bool {
	t.Helper()
	page, err := r.db.Changes(ctxT(t), engine.ChangesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, c := range page.Results {
		out[c.ID] = true
	}
	return out
}
