package tests

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
)

// TestRelayUpstreams runs the livesync-relay binary with upstreams on the
// test CouchDB-protocol server (express-pouchdb) and the test S3 server
// (versitygw): replication both ways with each kind of upstream, and the
// hunt for held notes' chunks across them. The subtests run side by side
// (each has its own relay, database and bucket): the hunt's waits for its
// 60-second rate window leave the machine idle.
func TestRelayUpstreams(t *testing.T) {
	t.Parallel()
	couchServer(t)
	s3Server(t)
	bin := buildRelay(t)
	t.Run("Bridge", func(t *testing.T) { t.Parallel(); testUpstreamBridge(t, bin) })
	t.Run("HuntSplit", func(t *testing.T) { t.Parallel(); testUpstreamHuntSplit(t, bin) })
	t.Run("FailingSource", func(t *testing.T) { t.Parallel(); testUpstreamFailingSource(t, bin) })
	t.Run("Status", func(t *testing.T) { t.Parallel(); testUpstreamStatus(t, bin) })
}

// upCouchClient opens the test server's database name as a LiveSync
// client: the handshake gives it its salt.
func upCouchClient(t *testing.T, name string) (*couchdb.DB, *livesync.Codec, []byte) {
	t.Helper()
	db := openDB(t, couchServer, name, true, nil)
	salt, _, err := db.Handshake(ctxT(t), couchdb.HandshakeOptions{NodeID: "upstream-test-" + name, Settings: upSettings.TweakValues()})
	if err != nil {
		t.Fatal(err)
	}
	codec, err := livesync.New(livesync.Config{Settings: upSettings, Salt: salt})
	if err != nil {
		t.Fatal(err)
	}
	return db, codec, salt
}

// "a note written through upstream B (CouchDB) reaches upstream C
// (bucket) and the relay's own clients, and one written to C reaches B,
// E2EE on (same passphrase; the bucket has its own salt)".
func testUpstreamBridge(t *testing.T, bin string) {
	ce, se := couchServer(t), s3Server(t)
	b, codec, saltB := upCouchClient(t, dbName(t))
	bk, _ := freshBucket(t)
	dev := newUpDevice(t, bk, "bucket-device")
	if string(dev.jc.salt) == string(saltB) {
		t.Fatal("the bucket and the CouchDB share a salt")
	}
	r := upStartRelay(t, bin, "", upCouch(ce, "b", ce.url, b.Name(), "sync", "LSGO_UP_B")+upBucket(se, bk, "c", "sync", "LSGO_UP_C", ""),
		"LSGO_UP_B="+ce.password, "LSGO_UP_C="+se.secret)
	ub := r.waitUpstream(t, "b", upLive)
	uc := r.waitUpstream(t, "c", upLive)
	if ub.Boundary != "forward" || uc.Boundary != "encode" {
		t.Fatalf("boundaries: b %q, c %q (the relay should adopt B's salt and encode for the bucket)", ub.Boundary, uc.Boundary)
	}

	// B → relay → C.
	text1 := "# Through B\nwritten to the CouchDB upstream\n" + strings.Repeat("b", 3000)
	meta, chunks, m1, _ := upRemoteNote(t, codec, "Bridge/From B.md", text1)
	upPush(t, b, append(chunks, meta))
	upWaitInFeed(t, r.db, []string{m1.ID}, 60*time.Second)
	if got := upReadNote(t, r.db, codec, m1.ID); got != text1 {
		t.Fatalf("the relay's client reads %d bytes, want %d", len(got), len(text1))
	}
	upPoll(t, "the note from B in the bucket", func() bool { return dev.readNote(t, m1.ID) == text1 }, nil)

	// C → relay → B.
	text2 := "# Through C\nwritten to the bucket\n" + strings.Repeat("c", 3000)
	m2 := writeFiles(t, dev.st, dev.jc.codec, map[string][]byte{"Bridge/From C.md": []byte(text2)})["Bridge/From C.md"]
	if _, err := dev.j.Send(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	upWaitInFeed(t, r.db, []string{m2.ID}, 60*time.Second)
	upWaitInFeed(t, b, []string{m2.ID}, 60*time.Second)
	upPoll(t, "the note from C on B", func() bool { return upReadNote(t, b, codec, m2.ID) == text2 }, nil)
	// On B in B's form: encrypted chunks, the revision the bucket's device wrote.
	docs, err := b.DocsByID(ctxT(t), []string{m2.ID, m2.Children[0]})
	if err != nil {
		t.Fatal(err)
	}
	var chunk, metaB struct {
		Rev string `json:"_rev"`
		E   bool   `json:"e_"`
	}
	json.Unmarshal(docs[m2.Children[0]], &chunk)
	json.Unmarshal(docs[m2.ID], &metaB)
	if !chunk.E || metaB.Rev != m2.Rev {
		t.Errorf("on B: chunk encrypted %v, revision %s (want %s)", chunk.E, metaB.Rev, m2.Rev)
	}

	// The counters: a batch or pack is counted when the relay has its
	// answer, which can be after the note is readable where it went, so
	// they are polled until each direction counted something; and no
	// errors meanwhile.
	var ups map[string]upUpstream
	upPoll(t, "every direction counted", func() bool {
		_, ups = r.status(t)
		return ups["b"].DocsPulled > 0 && ups["b"].DocsPushed > 0 && ups["c"].DocsPulled > 0 && ups["c"].DocsPushed > 0
	}, func() string { return fmt.Sprintf("counters: %+v", ups) })
	if ups["b"].Errors != 0 || ups["c"].Errors != 0 {
		t.Errorf("counters: %+v", ups)
	}
	t.Logf("b: %+v", ups["b"])
	t.Logf("c: %+v", ups["c"])
}

// "relay A holds a note whose chunks exist only on upstream B (another
// CouchDB-protocol server) and upstream C (a bucket), split between them:
// the hunt fetches the missing chunks from both and releases the note;
// counters prove the per-source limits held" — with 40 notes, so that
// each source needs more requests than one rate window allows.
func testUpstreamHuntSplit(t *testing.T, bin string) {
	const notes = 40
	ce, se := couchServer(t), s3Server(t)
	b, codec, _ := upCouchClient(t, dbName(t))
	bk, _ := freshBucket(t)
	dev := newUpDevice(t, bk, "bucket-device")
	r := upStartRelay(t, bin, "pushed_delay = \"1s\"",
		upCouch(ce, "b", ce.url, b.Name(), "source", "LSGO_UP_B")+upBucket(se, bk, "c", "source", "LSGO_UP_C", "direct_fetch = true"),
		"LSGO_UP_B="+ce.password, "LSGO_UP_C="+se.secret)
	r.waitUpstream(t, "b", upLive)
	r.waitUpstream(t, "c", upLive)

	var metas []json.RawMessage
	var ids []string
	var onB []json.RawMessage
	var onC []engine.Chunk
	texts := map[string]string{}
	for i := range notes {
		text := fmt.Sprintf("# Note %d\n%s", i, strings.Repeat(fmt.Sprintf("line %d of a note split between two upstreams\n", i), 120))
		meta, chunks, m, plain := upRemoteNote(t, codec, fmt.Sprintf("Split/%02d.md", i), text)
		if len(chunks) < 2 {
			t.Fatalf("note %d has %d chunks", i, len(chunks))
		}
		half := len(chunks) / 2
		onB = append(onB, chunks[:half]...)
		onC = append(onC, plain[half:]...)
		metas = append(metas, meta)
		ids = append(ids, m.ID)
		texts[m.ID] = text
	}
	upPush(t, b, onB)
	dev.sendChunks(t, onC)

	start := time.Now()
	upPush(t, r.db, metas)
	s, _ := r.status(t)
	if held := len(s.Databases[0].Held); held != notes {
		t.Fatalf("held after the push: %d, want %d", held, notes)
	}
	upWaitInFeed(t, r.db, ids, 4*time.Minute)
	took := time.Since(start)
	for _, id := range ids {
		if got := upReadNote(t, r.db, codec, id); got != texts[id] {
			t.Fatalf("%s reads %d bytes, want %d", id, len(got), len(texts[id]))
		}
	}
	s, ups := r.status(t)
	lim := s.Databases[0].Hunt.Limits
	if lim.MaxInFlight != 5 || lim.MaxPerWindow != 30 || lim.WindowSeconds != 60 {
		t.Fatalf("limits %+v", lim)
	}
	for name, want := range map[string]int{"b": len(onB), "c": len(onC)} {
		h := ups[name].Hunt
		t.Logf("%s: %d requests (%d found, %d missing, %d failed), %d chunks, at most %d in flight and %d in one window",
			name, h.Requests, h.Found, h.Missing, h.Failed, h.Chunks, h.MaxInFlight, h.MaxInWindow)
		if h.Chunks != uint64(want) {
			t.Errorf("%s: %d chunks found, want %d", name, h.Chunks, want)
		}
		if h.MaxInFlight < 1 || h.MaxInFlight > lim.MaxInFlight || h.MaxInWindow > lim.MaxPerWindow {
			t.Errorf("%s: the per-source limits did not hold: %+v", name, h)
		}
		if h.Requests <= uint64(lim.MaxPerWindow) {
			t.Errorf("%s: %d requests: the window limit never bound", name, h.Requests)
		}
	}
	if took < time.Minute {
		t.Errorf("released in %v: more than 30 requests per source fit in less than the 60 s window", took)
	}
	t.Logf("%d notes released in %v", notes, took.Round(time.Second))
	metrics := string(r.get(t, "/metrics"))
	for _, src := range []string{"b", "c"} {
		m := regexp.MustCompile(`livesync_relay_hunt_max_in_window\{db="vault",source="` + src + `"\} (\d+)`).FindStringSubmatch(metrics)
		if m == nil {
			t.Fatalf("no hunt_max_in_window for %s in /metrics", src)
		}
		if n, _ := strconv.Atoi(m[1]); n > 30 {
			t.Errorf("/metrics: %s had %d requests in one window", src, n)
		}
	}
}

// "a failing source (B down: closed port) → the hunt backs off for that
// source and still gets everything from the others".
func testUpstreamFailingSource(t *testing.T, bin string) {
	ce, se := couchServer(t), s3Server(t)
	b, codec, _ := upCouchClient(t, dbName(t))
	proxy := newUpProxy(t, upHostPort(ce.url))
	bk, _ := freshBucket(t)
	dev := newUpDevice(t, bk, "bucket-device")
	r := upStartRelay(t, bin, "pushed_delay = \"500ms\"",
		upCouch(ce, "b", proxy.url(), b.Name(), "source", "LSGO_UP_B")+upBucket(se, bk, "c", "source", "LSGO_UP_C", "direct_fetch = true"),
		"LSGO_UP_B="+ce.password, "LSGO_UP_C="+se.secret)
	r.waitUpstream(t, "b", upLive)
	r.waitUpstream(t, "c", upLive)
	proxy.close() // B is down: its port refuses connections

	var metas []json.RawMessage
	var ids []string
	var onC []engine.Chunk
	for i := range 5 {
		meta, _, m, plain := upRemoteNote(t, codec, fmt.Sprintf("Down/%d.md", i), fmt.Sprintf("note %d\n%s", i, strings.Repeat("only in the bucket\n", 200)))
		metas, ids, onC = append(metas, meta), append(ids, m.ID), append(onC, plain...)
	}
	dev.sendChunks(t, onC)
	// And one whose chunks are nowhere: it stays held, waiting for its
	// next pass.
	lost, _, lostMeta, _ := upRemoteNote(t, codec, "Down/lost.md", "chunks nowhere\n")
	upPush(t, r.db, append(metas, lost))
	upWaitInFeed(t, r.db, ids, 60*time.Second)

	var s upStatus
	var ups map[string]upUpstream
	upPoll(t, "the lost note waiting for its next pass", func() bool {
		s, ups = r.status(t)
		return s.Databases[0].Hunt.Waiting == 1 && ups["b"].Hunt.Failed >= 1 && len(s.Databases[0].Held) == 1
	}, func() string { return fmt.Sprintf("%+v", s) })
	hb, hc := ups["b"].Hunt, ups["c"].Hunt
	distinct := map[string]bool{}
	for _, c := range onC {
		distinct[c.ID] = true
	}
	if hb.Requests != hb.Failed || hb.Chunks != 0 || hc.Chunks != uint64(len(distinct)) {
		t.Errorf("b %+v, c %+v", hb, hc)
	}
	// Each document asked B at most once in a pass, never retried within
	// it. The lost note may have started its second pass by the time
	// /status answers on a loaded machine (one CI run saw 7 of 6), so
	// allow two passes each: a retry within a pass (4 attempts) would
	// still exceed it.
	if hb.Failed > uint64(2*(len(ids)+1)) {
		t.Errorf("B failed %d requests for %d documents in at most two passes", hb.Failed, len(ids)+1)
	}
	if ub := ups["b"]; ub.State != "backoff" || !strings.Contains(ub.LastError, "connection refused") {
		t.Errorf("b: state %s, last error %q", ub.State, ub.LastError)
	}
	held := s.Databases[0].Held
	if len(held) != 1 || held[0].Doc != lostMeta.ID {
		t.Errorf("held: %+v", held)
	}
}

// "/status and /metrics show upstream state, lag and last error (e.g.
// wrong password on an upstream → state error with a clear message, no
// password in it)".
func testUpstreamStatus(t *testing.T, bin string) {
	ce, se := couchServer(t), s3Server(t)
	good, _, _ := upCouchClient(t, dbName(t))
	bad := openDB(t, couchServer, dbName(t), true, nil)
	bk, _ := freshBucket(t)
	const wrongPW, wrongSecret = "wrong-couch-password-0xC0FFEE", "wrong-s3-secret-0xBADBAD"
	r := upStartRelay(t, bin, "",
		upCouch(ce, "good", ce.url, good.Name(), "sync", "LSGO_UP_GOOD")+
			upCouch(ce, "wrong-password", ce.url, bad.Name(), "pull", "LSGO_UP_WRONG")+
			upBucket(se, bk, "wrong-secret", "sync", "LSGO_UP_WRONG_S3", ""),
		"LSGO_UP_GOOD="+ce.password, "LSGO_UP_WRONG="+wrongPW, "LSGO_UP_WRONG_S3="+wrongSecret)
	g := r.waitUpstream(t, "good", upLive)
	w := r.waitUpstream(t, "wrong-password", func(u upUpstream) bool { return u.State == "error" })
	ws := r.waitUpstream(t, "wrong-secret", func(u upUpstream) bool { return u.State == "error" })
	if g.Lag != 0 || g.LastError != "" || g.LastSuccess == nil || g.Location != ce.url+"/"+good.Name() {
		t.Errorf("good: %+v", g)
	}
	if !strings.Contains(w.LastError, "authentication failed: check user and the password") || w.Errors == 0 {
		t.Errorf("wrong password: %+v", w)
	}
	// The bucket adapter says which setting is wrong; the relay names its
	// configuration keys for it.
	if !strings.Contains(ws.LastError, "authentication failed: check the secret key (secret_key_file or secret_key_env): ") {
		t.Errorf("wrong secret key: %+v", ws)
	}
	raw := string(r.get(t, "/status"))
	metrics := string(r.get(t, "/metrics"))
	for _, secret := range []string{wrongPW, wrongSecret, ce.password, se.secret, upPassphrase, r.password} {
		if strings.Contains(raw, secret) || strings.Contains(metrics, secret) || strings.Contains(r.p.output(), secret) {
			t.Errorf("a secret is in /status, /metrics or the log")
		}
	}
	for _, want := range []string{
		`livesync_relay_upstream_up{db="vault",upstream="good"} 1`,
		`livesync_relay_upstream_up{db="vault",upstream="wrong-password"} 0`,
		`livesync_relay_upstream_state{db="vault",state="error",upstream="wrong-password"} 1`,
		`livesync_relay_upstream_state{db="vault",state="error",upstream="wrong-secret"} 1`,
		`livesync_relay_upstream_lag{db="vault",upstream="good"} 0`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if !regexp.MustCompile(`livesync_relay_upstream_errors_total\{db="vault",upstream="wrong-password"\} [1-9]`).MatchString(metrics) {
		t.Error("/metrics: no errors counted for the wrong password")
	}
	var pretty struct {
		Databases []struct {
			Upstreams []json.RawMessage `json:"upstreams"`
		} `json:"databases"`
	}
	json.Unmarshal([]byte(raw), &pretty)
	for _, u := range pretty.Databases[0].Upstreams {
		if slices.Contains([]string{"good", "wrong-password"}, upNameOf(u)) {
			t.Logf("%s", u)
		}
	}
}

func upNameOf(raw json.RawMessage) string {
	var u struct {
		Name string `json:"name"`
	}
	json.Unmarshal(raw, &u)
	return u.Name
}

// couchdb.DB.DocsByID, the raw read the relay's hunt uses on a CouchDB
// upstream: documents as stored (encrypted chunks stay encrypted, _rev
// included); missing and deleted ids are absent; more than 100 ids is an
// error.
func TestRelayUpstreamDocsByID(t *testing.T) {
	db, codec, _ := upCouchClient(t, dbName(t))
	meta, chunks, m, _ := upRemoteNote(t, codec, "Raw.md", "read raw\n")
	upPush(t, db, append(chunks, meta))
	ctx := ctxT(t)
	gone := json.RawMessage(`{"_id":"gone","_rev":"2-b","_deleted":true,"_revisions":{"start":2,"ids":["b","a"]}}`)
	upPush(t, db, []json.RawMessage{gone})
	got, err := db.DocsByID(ctx, []string{m.Children[0], m.ID, "nothing-here", "gone"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("%d documents: %v", len(got), got)
	}
	var c struct {
		ID   string `json:"_id"`
		Rev  string `json:"_rev"`
		Data string `json:"data"`
		E    bool   `json:"e_"`
	}
	if err := json.Unmarshal(got[m.Children[0]], &c); err != nil || c.ID != m.Children[0] || !strings.HasPrefix(c.Rev, "1-") || !c.E || !strings.HasPrefix(c.Data, "%") {
		t.Fatalf("chunk as stored: %s", got[m.Children[0]])
	}
	if _, err := db.DocsByID(ctx, make([]string, 101)); err == nil {
		t.Error("101 ids were accepted")
	}
}
