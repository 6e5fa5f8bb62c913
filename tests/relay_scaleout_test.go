package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
)

// TestRelayScaleout runs several livesync-relay processes in front of one
// database on the CouchDB-protocol test server ([databases.store] kind =
// "couchdb", no data folder): clients spread across them converge; a note
// held by one relay is hidden on every relay and on the server until its
// chunks arrive through another; the hunt's lease moves to a survivor when
// its holder is killed and the per-source limits hold across the
// handover; two relays releasing the same note make one revision; and the
// relays answer 503 while CouchDB is unreachable and recover, losing
// nothing they acknowledged. The subtests run side by side, each with its
// own relays and databases.
func TestRelayScaleout(t *testing.T) {
	t.Parallel()
	couchServer(t)
	bin := buildRelay(t)
	t.Run("Converge", func(t *testing.T) { t.Parallel(); testScaleoutConverge(t, bin) })
	t.Run("MetadataFirst", func(t *testing.T) { t.Parallel(); testScaleoutMetadataFirst(t, bin) })
	t.Run("SaltFromAnotherRelay", func(t *testing.T) { t.Parallel(); testScaleoutSaltElsewhere(t, bin) })
	t.Run("Failover", func(t *testing.T) { t.Parallel(); testScaleoutFailover(t, bin, false) })
	// Killed once a lease renewal saved the window's requests: the
	// survivor must wait for the window the dead leader filled.
	t.Run("FailoverAfterRenewal", func(t *testing.T) { t.Parallel(); testScaleoutFailover(t, bin, true) })
	t.Run("ReleaseTwice", func(t *testing.T) { t.Parallel(); testScaleoutReleaseTwice(t, bin) })
	t.Run("CouchDBDown", func(t *testing.T) { t.Parallel(); testScaleoutCouchDBDown(t, bin) })
}

// soNotes makes n notes under dir, each of several chunks.
func soNotes(t *testing.T, c *livesync.Codec, dir string, n int) []soNote {
	t.Helper()
	return soNotesSized(t, c, dir, n, 90)
}

// soNotesSized makes n notes of lines lines under dir.
func soNotesSized(t *testing.T, c *livesync.Codec, dir string, n, lines int) []soNote {
	t.Helper()
	var out []soNote
	for i := range n {
		text := fmt.Sprintf("# %s %d\n%s", dir, i, strings.Repeat(fmt.Sprintf("line of note %d in %s, long enough for several chunks\n", i, dir), lines))
		nt := soMakeNote(t, c, fmt.Sprintf("%s/%02d.md", dir, i), text)
		if len(nt.chunks) < 2 {
			t.Fatalf("%s has %d chunks", nt.id, len(nt.chunks))
		}
		out = append(out, nt)
	}
	return out
}

// soWriteAll writes each note (chunks and metadata in one request) through
// db; it returns the first error, for use from several goroutines.
func soWriteAll(db *couchdb.DB, notes []soNote) error {
	for _, n := range notes {
		res, err := db.BulkDocs(context.Background(), append(append([]json.RawMessage{}, n.chunks...), n.meta))
		if err != nil {
			return fmt.Errorf("write %s through %s: %v", n.id, db.Name(), err)
		}
		for _, r := range res {
			if r.Error != "" {
				return fmt.Errorf("write %s: %+v", n.id, r)
			}
		}
	}
	return nil
}

// soReadable checks that every note reads back whole through each relay.
func soReadable(t *testing.T, codec *livesync.Codec, notes []soNote, rs ...*soRelay) {
	t.Helper()
	for _, r := range rs {
		for _, n := range notes {
			if got := upReadNote(t, r.db, codec, n.id); got != n.text {
				t.Errorf("relay %s: %s reads %d bytes, want %d", r.name, n.id, len(got), len(n.text))
			}
		}
	}
}

// "clients spread across the three converge": a vault set up through A
// (the first client's handshake), clients of B and C get its salt; notes
// written through A, B and C at the same time, and a conflict made by
// edits through B and C from the same parent, are served alike by the
// three relays and the server (_all_docs, _changes with every leaf, the
// conflict's winner and loser); a longpoll on C wakes for a write through
// A.
func testScaleoutConverge(t *testing.T, bin string) {
	server := freshDB(t, couchServer, nil)
	rs := soStartAll(t, bin, soSetup{database: server.Name()}, "a", "b", "c")
	a, b, c := rs[0], rs[1], rs[2]
	ctx := ctxT(t)
	salt, _, err := a.db.Handshake(ctx, couchdb.HandshakeOptions{NodeID: "client-a", Settings: upSettings.TweakValues()})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*soRelay{b, c} {
		s, _, err := r.db.Handshake(ctx, couchdb.HandshakeOptions{NodeID: "client-" + r.name, Settings: upSettings.TweakValues()})
		if err != nil || !bytes.Equal(s, salt) {
			t.Fatalf("handshake through %s: %v (same salt as through a: %v)", r.name, err, bytes.Equal(s, salt))
		}
	}
	codec := soHandshake(t, server, "reader")

	// A longpoll on C from now.
	page, err := c.db.Changes(ctx, engine.ChangesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	notes := map[string][]soNote{}
	for _, r := range rs {
		notes[r.name] = soNotes(t, codec, "Converge/"+r.name, 4)
	}
	woke := make(chan error, 1)
	go func() { woke <- soLongpollFor(c.db, page.LastSeq, notes["a"][0].id, 15*time.Second) }()

	var wg sync.WaitGroup
	errs := make(chan error, len(rs))
	for _, r := range rs {
		wg.Go(func() { errs <- soWriteAll(r.db, notes[r.name]) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := <-woke; err != nil {
		t.Errorf("a longpoll on c: %v", err)
	}

	// Two edits of a note from A, through B and through C, from the same
	// parent: a conflict every side must show alike.
	x := notes["a"][0]
	soPush(t, b.db, soEdit(t, x, "b0b0"))
	soPush(t, c.db, soEdit(t, x, "c0c0"))

	sides := []soSide{a.side(), b.side(), c.side(), soServerSide(t, server)}
	want := sides[3].changes(t)
	wantAll := sides[3].allDocs(t)
	for _, ns := range notes {
		for _, n := range ns {
			if _, ok := wantAll[n.id]; !ok {
				t.Fatalf("%s is not on the server", n.id)
			}
		}
	}
	if want[x.id] != "2-b0b0,2-c0c0" {
		t.Fatalf("the conflict on the server: %q", want[x.id])
	}
	for _, s := range sides[:3] {
		if got := s.changes(t); !maps.Equal(got, want) {
			t.Errorf("%s: _changes differs from the server's:\n%v\n%v", s.name, got, want)
		}
		if got := s.allDocs(t); !maps.Equal(got, wantAll) {
			t.Errorf("%s: _all_docs differs from the server's", s.name)
		}
		var doc struct {
			Rev       string   `json:"_rev"`
			Conflicts []string `json:"_conflicts"`
		}
		s.getOK(t, "/"+url.PathEscape(x.id)+"?conflicts=true", &doc)
		if doc.Rev != "2-c0c0" || len(doc.Conflicts) != 1 || doc.Conflicts[0] != "2-b0b0" {
			t.Errorf("%s: the conflicted note: %+v", s.name, doc)
		}
	}
	var all []soNote
	for _, ns := range notes {
		all = append(all, ns...)
	}
	soReadable(t, codec, all[1:], rs...)
}

// soEdit is a second revision 2-id of n's metadata (same body), as a
// replicator sends it.
func soEdit(t *testing.T, n soNote, id string) json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(n.meta, &m); err != nil {
		t.Fatal(err)
	}
	m["_rev"], _ = json.Marshal("2-" + id)
	m["_revisions"], _ = json.Marshal(map[string]any{"start": 2, "ids": []string{id, strings.TrimPrefix(n.rev, "1-")}})
	b, _ := json.Marshal(m)
	return b
}

// soLongpollFor longpolls db's feed from since until id is in it.
func soLongpollFor(db *couchdb.DB, since, id string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		page, err := db.Changes(ctx, engine.ChangesRequest{Since: since, Wait: true})
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", id, err)
		}
		for _, c := range page.Results {
			if c.ID == id {
				return nil
			}
		}
		since = page.LastSeq
	}
}

// "a note pushed metadata-first through relay A stays hidden on A, B and
// C (and on the server) until its chunks arrive through C": half of the
// chunks through C release nothing, the rest through B release it on
// every relay.
func testScaleoutMetadataFirst(t *testing.T, bin string) {
	server, codec := soVault(t)
	rs := soStartAll(t, bin, soSetup{database: server.Name()}, "a", "b", "c")
	a, b, c := rs[0], rs[1], rs[2]
	n := soNotes(t, codec, "Held", 1)[0]
	sides := []soSide{a.side(), b.side(), c.side(), soServerSide(t, server)}

	soPush(t, a.db, n.meta)
	soHidden(t, n.id, sides...)
	// Still hidden after several refreshes and lease renewals, and the
	// other relays know the hold.
	time.Sleep(soTTL)
	soHidden(t, n.id, sides...)
	for _, r := range rs {
		s := r.mustStatus(t)
		t.Logf("relay %s: held %v, shared %+v", r.name, s.Held, s.Shared)
	}

	half := len(n.chunks) / 2
	soPush(t, c.db, n.chunks[:half]...)
	time.Sleep(3 * soRefresh)
	soHidden(t, n.id, sides...)

	start := time.Now()
	soPush(t, b.db, n.chunks[half:]...)
	soWaitVisible(t, 15*time.Second, []soNote{n}, sides...)
	t.Logf("released on every relay and the server %v after its last chunks", time.Since(start).Round(time.Millisecond))
	soReadable(t, codec, []soNote{n}, rs...)
}

// The vault set up through B (the first client's handshake writes the
// salt there), then at once a note pushed metadata-first through A: A
// must hold it as well, although the salt and the milestone were never
// written through it.
func testScaleoutSaltElsewhere(t *testing.T, bin string) {
	server := freshDB(t, couchServer, nil)
	rs := soStartAll(t, bin, soSetup{database: server.Name()}, "a", "b")
	a, b := rs[0], rs[1]
	codec := soHandshake(t, b.db, "first-client")
	// The client's next request, its push, lands on A (a load balancer
	// sends each request where it likes) at once: A saw no write of the
	// vault's settings, and need not have refreshed since.
	n := soNotes(t, codec, "Salt", 1)[0]
	sides := []soSide{a.side(), b.side(), soServerSide(t, server)}
	soPush(t, a.db, n.meta)
	soHidden(t, n.id, sides...)
	soPush(t, b.db, n.chunks...)
	soWaitVisible(t, 15*time.Second, []soNote{n}, sides...)
	soReadable(t, codec, []soNote{n}, rs...)
}

// "two relays releasing the same note produce one revision": the same
// metadata pushed through A and through B (a client retrying behind a
// load balancer) is held by both; the chunks written straight to the
// server reach every relay's feed at once, so several release each note.
// The server keeps one revision of each: no second leaf, no conflict, a
// history of one.
func testScaleoutReleaseTwice(t *testing.T, bin string) {
	server, codec := soVault(t)
	rs := soStartAll(t, bin, soSetup{database: server.Name()}, "a", "b", "c")
	notes := soNotes(t, codec, "Twice", 8)
	var metas, chunks []json.RawMessage
	for _, n := range notes {
		metas = append(metas, n.meta)
		chunks = append(chunks, n.chunks...)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, r := range rs[:2] {
		wg.Go(func() {
			res, err := r.db.BulkDocs(context.Background(), metas)
			if err == nil {
				for _, x := range res {
					if x.Error != "" {
						err = fmt.Errorf("%+v", x)
					}
				}
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("push metadata: %v", err)
		}
	}
	srv := soServerSide(t, server)
	sides := []soSide{rs[0].side(), rs[1].side(), rs[2].side(), srv}
	soHidden(t, notes[0].id, sides...)
	soPush(t, server, chunks...)
	took := soWaitVisible(t, 15*time.Second, notes, sides...)
	t.Logf("released %v after the chunks", took.Round(time.Millisecond))
	// A relay that still held a note when another released it must not
	// write it again as something else.
	time.Sleep(3 * soRefresh)
	soOneRevision(t, srv, notes)
	// The race happened: more than one relay wrote releases.
	var released, holds uint64
	releasers := 0
	for _, r := range rs {
		s := r.mustStatus(t)
		released, holds = released+s.Holdback.Released, holds+s.Holdback.Holds
		if s.Holdback.Released > 0 {
			releasers++
		}
	}
	t.Logf("holds %d, releases %d by %d relays for %d notes", holds, released, releasers, len(notes))
	if releasers < 2 {
		t.Errorf("%d relay(s) released: the test did not make two relays release the same notes", releasers)
	}
	soReadable(t, codec, notes, rs...)
}

// soOneRevision checks on the server that each note has one revision: its
// pushed one, alone in _revs_info and open_revs=all, with no conflict.
func soOneRevision(t *testing.T, srv soSide, notes []soNote) {
	t.Helper()
	feed := srv.changes(t)
	for _, n := range notes {
		var doc struct {
			Rev       string   `json:"_rev"`
			Conflicts []string `json:"_conflicts"`
			RevsInfo  []struct {
				Rev    string `json:"rev"`
				Status string `json:"status"`
			} `json:"_revs_info"`
		}
		srv.getOK(t, "/"+url.PathEscape(n.id)+"?revs_info=true&conflicts=true", &doc)
		if doc.Rev != n.rev || len(doc.Conflicts) != 0 || len(doc.RevsInfo) != 1 || doc.RevsInfo[0].Rev != n.rev {
			t.Errorf("%s on the server: %+v, want the one revision %s", n.id, doc, n.rev)
		}
		var leaves []map[string]json.RawMessage
		code, b := srv.get(t, "/"+url.PathEscape(n.id)+"?open_revs=all")
		if code != 200 || json.Unmarshal(b, &leaves) != nil || len(leaves) != 1 || leaves[0]["ok"] == nil {
			t.Errorf("%s: open_revs=all: %d %.500s", n.id, code, b)
		}
		if feed[n.id] != n.rev {
			t.Errorf("%s in the server's _changes: %q, want %s", n.id, feed[n.id], n.rev)
		}
	}
}

// "CouchDB unreachable → relays answer 503 and recover when it returns,
// with nothing lost": the relays reach the server through a TCP proxy the
// test closes (connections refused) and reopens on the same port.
func testScaleoutCouchDBDown(t *testing.T, bin string) {
	ce := couchServer(t)
	server, codec := soVault(t)
	px := newSoTCPProxy(t, upHostPort(ce.url))
	rs := soStartAll(t, bin, soSetup{couchURL: px.url(), database: server.Name()}, "a", "b")
	a, b := rs[0], rs[1]
	notes := soNotes(t, codec, "Down", 8)
	if err := soWriteAll(a.db, notes[:2]); err != nil {
		t.Fatal(err)
	}
	if err := soWriteAll(b.db, notes[2:4]); err != nil {
		t.Fatal(err)
	}
	acked := append([]soNote{}, notes[:4]...)

	px.stop()
	downAt := time.Now()
	for i, r := range rs {
		soWaitCode(t, r, "/vault/_all_docs", 503, 10*time.Second)
		acked = append(acked, soCheckDown(t, r, notes[4+i])...)
	}
	t.Logf("503 from both relays %v after CouchDB went away", time.Since(downAt).Round(time.Millisecond))

	if err := px.start(); err != nil {
		t.Fatal(err)
	}
	upAt := time.Now()
	for _, r := range rs {
		soWaitCode(t, r, "/vault/_all_docs", 200, 20*time.Second)
	}
	t.Logf("both relays serve again %v after CouchDB came back", time.Since(upAt).Round(time.Millisecond))
	if err := soWriteAll(a.db, notes[6:7]); err != nil {
		t.Fatal(err)
	}
	if err := soWriteAll(b.db, notes[7:8]); err != nil {
		t.Fatal(err)
	}
	acked = append(acked, notes[6:8]...)

	// The coordination recovered too: a note held by A is released when
	// its chunks come through B.
	h := soNotes(t, codec, "DownHeld", 1)[0]
	sides := []soSide{a.side(), b.side(), soServerSide(t, server)}
	soPush(t, a.db, h.meta)
	soHidden(t, h.id, sides...)
	soPush(t, b.db, h.chunks...)
	soWaitVisible(t, 15*time.Second, append(acked, h), sides...)
	soReadable(t, codec, append(acked, h), rs...)
}

// soWaitCode polls GET path on r as the admin until it answers code.
func soWaitCode(t *testing.T, r *soRelay, path string, code int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got, b, err := soHTTP("GET", r.url+path, "admin", r.password, nil)
		if got == code {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("relay %s: GET %s: %d %.300s %v, want %d within %v", r.name, path, got, b, err, code, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// soCheckDown checks a relay while CouchDB is unreachable: database
// requests answer 503, /healthz 200, /status answers; a write of n is
// refused. It returns n if the relay acknowledged it anyway (it must
// then be there after the recovery).
func soCheckDown(t *testing.T, r *soRelay, n soNote) []soNote {
	t.Helper()
	for _, path := range []string{"/vault", "/vault/" + url.PathEscape(n.id), "/vault/_changes", "/vault/_local/livesync-check"} {
		if code, b, err := soHTTP("GET", r.url+path, "admin", r.password, nil); code != 503 {
			t.Errorf("relay %s down: GET %s: %d %.200s %v, want 503", r.name, path, code, b, err)
		}
	}
	if code, _, err := soHTTP("GET", r.url+"/healthz", "", "", nil); code != 200 {
		t.Errorf("relay %s down: /healthz %d %v", r.name, code, err)
	}
	if s, raw, ok := r.status(); !ok {
		t.Errorf("relay %s down: /status: %.300s", r.name, raw)
	} else {
		t.Logf("relay %s down: shared %+v", r.name, s.Shared)
	}
	body, _ := json.Marshal(map[string]any{"new_edits": false, "docs": append(append([]json.RawMessage{}, n.chunks...), n.meta)})
	code, b, err := soHTTP("POST", r.url+"/vault/_bulk_docs", "admin", r.password, body)
	if code != 503 {
		t.Errorf("relay %s down: _bulk_docs: %d %.300s %v, want 503", r.name, code, b, err)
	}
	if code/100 == 2 {
		return []soNote{n}
	}
	return nil
}

// "killing the hunting relay moves the lease, and the hunt continues
// within the limits (asserted from counters across relays)": three
// relays with an upstream that alone has the chunks of notes pushed
// metadata-first through the leader; hunt limits of 1 request in flight
// and 3 per 8 s window (longer than a handover), one chunk per request.
// The leader is killed (SIGKILL) the moment its third request of a window
// reaches the upstream: what it did since its last lease renewal is known
// only to it, so this is the handover where a limit is hardest to keep. A
// survivor takes the lease within the TTL and a margin and releases every
// note; the upstream's log of the requests of every relay never shows
// more than 3 in a window or 2 at once.
//
// With afterRenewal the kill comes once a lease renewal has saved the
// hunt's state with the third request. Either way the survivor that takes
// the expired lease asks the upstream nothing for one window, since what
// the dead leader did after its last renewal is unknown.
func testScaleoutFailover(t *testing.T, bin string, afterRenewal bool) {
	const perWindow, window = 3, 8 * time.Second
	ce := couchServer(t)
	server, codec := soVault(t)
	up, _ := soVaultLike(t, server)
	hl, upURL := newSoHuntLog(t, ce.url)
	global := fmt.Sprintf("[purgatory]\npushed_delay = \"200ms\"\n\n[hunt]\nmax_in_flight = 1\nmax_per_window = %d\nwindow = %q\n"+
		"batch_size = 1\nbackoff_base = \"1s\"\nbackoff_cap = \"2s\"\n", perWindow, window.String())
	rs := soStartAll(t, bin, soSetup{database: server.Name(), global: global,
		upstreams: upCouch(ce, "up", upURL, up.Name(), "source", "LSGO_SO_UP"), env: []string{"LSGO_SO_UP=" + ce.password}}, "a", "b", "c")
	hunter := soWaitHunter(t, rs...)

	notes := soNotesSized(t, codec, "Hunted", 2, 50)
	var metas, chunks []json.RawMessage
	distinct := map[string]bool{}
	for _, n := range notes {
		metas = append(metas, n.meta)
		chunks = append(chunks, n.chunks...)
		for _, id := range n.chunkIDs {
			distinct[id] = true
		}
	}
	if len(distinct) <= 2*perWindow {
		t.Fatalf("%d chunks: the hunt would not need a window after the handover", len(distinct))
	}
	soPush(t, up, chunks...)
	soPush(t, hunter.db, metas...)

	soWaitArrivals(t, hl, perWindow, 30*time.Second)
	leader := soVictim(t, hl, afterRenewal, rs)
	last := leader.mustStatus(t)
	killedAt := time.Now()
	// Not p.signal: the cleanup still waits for the exit it reports.
	if err := leader.p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var survivors []*soRelay
	for _, r := range rs {
		if r != leader {
			survivors = append(survivors, r)
		}
	}
	next := soFirstLeader(t, soTTL+2*time.Second, survivors...)
	t.Logf("relay %s took the lease %v after relay %s was killed", next.name, time.Since(killedAt).Round(time.Millisecond), leader.name)

	sides := []soSide{survivors[0].side(), survivors[1].side(), soServerSide(t, server)}
	soWaitVisible(t, 60*time.Second, notes, sides...)
	t.Logf("every note released %v after the kill", time.Since(killedAt).Round(time.Millisecond))
	soReadable(t, codec, notes, survivors...)
	soCheckHuntLimits(t, hl, killedAt, perWindow, window, last, leader, survivors)
	for _, r := range rs {
		t.Logf("relay %s's lease log:\n%s", r.name, soLeaseLines(r))
	}
}

// soVictim is the relay to kill once the window is full: the leader at
// once, or with afterRenewal the leader once it renewed the lease after
// the window's last request (its saved state then has every request).
func soVictim(t *testing.T, hl *soHuntLog, afterRenewal bool, rs []*soRelay) *soRelay {
	t.Helper()
	if !afterRenewal {
		return soFirstLeader(t, soTTL+2*time.Second, rs...)
	}
	arrivals, _ := hl.snapshot()
	// A renewal that ended this late began after the last request.
	renewedBy := arrivals[len(arrivals)-1].Add(soTTL + soTTL/3)
	deadline := time.Now().Add(3 * soTTL)
	for time.Now().Before(deadline) {
		for _, r := range rs {
			s, _, ok := r.status()
			if ok && s.Shared != nil && s.Shared.Leader && s.Shared.LeaseUntil != nil && s.Shared.LeaseUntil.After(renewedBy) {
				return r
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no leader renewed the lease after the window's last request")
	return nil
}

// soWaitHunter waits until a relay leads with its upstream "up" live, and
// returns it.
func soWaitHunter(t *testing.T, rs ...*soRelay) *soRelay {
	t.Helper()
	var found *soRelay
	var last []string
	upPoll(t, "a leader with its upstream live", func() bool {
		last = last[:0]
		for _, r := range rs {
			s, raw, ok := r.status()
			last = append(last, fmt.Sprintf("%s: %.500s", r.name, raw))
			if !ok || s.Shared == nil || !s.Shared.Leader {
				continue
			}
			for _, u := range s.Upstreams {
				if u.Name == "up" && u.State == "live" {
					found = r
					return true
				}
			}
		}
		return false
	}, func() string { return strings.Join(last, "\n") })
	return found
}

// soLeaseLines are the lines of r's log about the lease.
func soLeaseLines(r *soRelay) string {
	var out []string
	for _, l := range strings.Split(r.p.output(), "\n") {
		if strings.Contains(l, "lease") || strings.Contains(l, "leads") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// soWaitArrivals waits until the upstream received n hunt requests.
func soWaitArrivals(t *testing.T, hl *soHuntLog, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case got := <-hl.arrived:
			if got >= n {
				return
			}
		case <-deadline:
			got, _ := hl.snapshot()
			t.Fatalf("%d hunt requests within %v, want %d", len(got), timeout, n)
		}
	}
}

// soCheckHuntLimits checks the limits across the handover from the
// upstream's log and the relays' counters (the dead leader's last
// reading, last, and the survivors').
func soCheckHuntLimits(t *testing.T, hl *soHuntLog, killedAt time.Time, perWindow int, window time.Duration,
	last soDBStatus, dead *soRelay, survivors []*soRelay) {
	t.Helper()
	arrivals, inFlight := hl.snapshot()
	most, at := soMaxInWindow(arrivals, window, 300*time.Millisecond)
	after := 0
	for _, a := range arrivals {
		if a.After(killedAt) {
			after++
		}
	}
	var offsets []string
	for _, a := range arrivals {
		offsets = append(offsets, a.Sub(killedAt).Round(time.Millisecond).String())
	}
	t.Logf("upstream: %d hunt requests (%d after the kill), at most %d in a window, %d at once; arrivals relative to the kill: %v",
		len(arrivals), after, most, inFlight, offsets)
	if most > perWindow {
		t.Errorf("the upstream received %d hunt requests within one %v window from %v (%v after the kill): the limit of %d was exceeded across the handover",
			most, window, at.Format("15:04:05.000"), at.Sub(killedAt).Round(time.Millisecond), perWindow)
	}
	if inFlight > 1 {
		t.Errorf("%d hunt requests in flight at once, limit 1", inFlight)
	}
	if after == 0 {
		t.Error("no hunt request after the handover")
	}
	// The counters of the survivors (which may have passed the lease
	// between them) and the dead leader's last reading.
	var byThem, takeovers uint64
	for _, r := range survivors {
		s := r.mustStatus(t)
		h := soHuntOf(s)
		t.Logf("relay %s: leader %v, takeovers %d, hunt %+v", r.name, s.Shared != nil && s.Shared.Leader, soTakeovers(s), h)
		byThem += h.Requests
		takeovers += soTakeovers(s)
		if h.MaxInFlight > 1 || h.MaxInWindow > perWindow {
			t.Errorf("relay %s's counters exceed the limits: %+v", r.name, h)
		}
	}
	t.Logf("relay %s's last reading before the kill: hunt %+v", dead.name, soHuntOf(last))
	if byThem == 0 || takeovers == 0 {
		t.Errorf("the survivors counted %d hunt requests and %d takeovers", byThem, takeovers)
	}
	if sum := byThem + soHuntOf(last).Requests; sum > uint64(len(arrivals)) {
		t.Errorf("the relays counted %d hunt requests, the upstream received %d", sum, len(arrivals))
	}
}

// upHunt is the hunt counters of one upstream in /status.
type upHunt = struct {
	ThrottleKey string `json:"throttle_key"`
	CanFetch    bool   `json:"can_fetch"`
	Requests    uint64 `json:"requests"`
	Found       uint64 `json:"found"`
	Missing     uint64 `json:"missing"`
	Failed      uint64 `json:"failed"`
	Chunks      uint64 `json:"chunks"`
	MaxInFlight int    `json:"max_in_flight"`
	MaxInWindow int    `json:"max_in_window"`
}

func soHuntOf(s soDBStatus) upHunt {
	for _, u := range s.Upstreams {
		if u.Name == "up" {
			return u.Hunt
		}
	}
	return upHunt{}
}

func soTakeovers(s soDBStatus) uint64 {
	if s.Shared == nil {
		return 0
	}
	return s.Shared.Takeovers
}
