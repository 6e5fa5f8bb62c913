package tests

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	miniogo "github.com/minio/minio-go/v7"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
)

// TestRelayUpstreamReset runs the livesync-relay binary against upstreams
// that are reset under it, which it must notice and heal, and one that
// was re-keyed, which it must refuse: a CouchDB-protocol database
// recreated empty within the relay's backoff delay and again after it,
// one re-keyed with another salt, and a catch-up whose lag must count
// down, with /status and /metrics agreeing. The subtests run side by side
// (each has its own relay, databases and buckets): most of their time is
// spent waiting for a relay's next pass. The catch-ups are
// LIVESYNC_TEST_LAG_NOTES notes of two documents each (default
// lagNotesDefault; 5000, a 10,000-document catch-up, for a long run).
func TestRelayUpstreamReset(t *testing.T) {
	t.Parallel()
	couchServer(t)
	bin := buildRelay(t)
	notes := loadEnvInt(t, "LIVESYNC_TEST_LAG_NOTES", lagNotesDefault)
	t.Run("Recreated", func(t *testing.T) { t.Parallel(); testUpstreamRecreated(t, bin) })
	t.Run("Rekeyed", func(t *testing.T) { t.Parallel(); testUpstreamRekeyed(t, bin) })
	t.Run("CatchUpLag", func(t *testing.T) { t.Parallel(); testUpstreamCatchUpLag(t, bin, notes) })
	t.Run("BucketPushLag", func(t *testing.T) { t.Parallel(); testUpstreamBucketPushLag(t, bin, notes) })
	t.Run("BucketWiped", func(t *testing.T) { t.Parallel(); testUpstreamBucketWiped(t, bin, false) })
	t.Run("BucketPacksWiped", func(t *testing.T) { t.Parallel(); testUpstreamBucketWiped(t, bin, true) })
	t.Run("WhileStopped", func(t *testing.T) { t.Parallel(); testUpstreamResetWhileStopped(t, bin) })
}

// rsStartRelayIn is upStartRelay in the folder wd, so that a second
// start finds the first one's data.
func rsStartRelayIn(t *testing.T, bin, wd, ups string, env ...string) *upRelay {
	t.Helper()
	conf := fmt.Sprintf("data_dir = %q\n\n[[users]]\nname = \"admin\"\npassword_env = \"LSGO_UP_ADMIN\"\nadmin = true\n\n"+
		"[[databases]]\nname = \"vault\"\npassphrase_env = \"LSGO_UP_PASSPHRASE\"\n\n%s", filepath.Join(wd, "data"), ups)
	if err := os.WriteFile(filepath.Join(wd, "relay.toml"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	r := &upRelay{password: hexToken(t)}
	env = append(env, "LSGO_UP_ADMIN="+r.password, "LSGO_UP_PASSPHRASE="+upPassphrase)
	r.p = startRelayOpts(t, bin, wd, relayStart{env: env, args: []string{"--config", filepath.Join(wd, "relay.toml"), "--listen", "127.0.0.1:0"}, maxLine: 1 << 20, graceful: true})
	r.url = r.p.url
	db, err := couchdb.New(couchdb.Config{URL: r.url, Database: "vault", User: "admin", Password: r.password})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	r.db = db
	return r
}

// "… and kept reporting live, lag 0 and upstream_up 1 — even after the
// relay itself restarted": B is recreated empty while the relay is
// stopped; the restarted relay remembers B's marker, notices the reset
// and refills B.
func testUpstreamResetWhileStopped(t *testing.T, bin string) {
	ce := couchServer(t)
	name := dbName(t)
	b, codec, saltB := upCouchClient(t, name)
	notes := rsNotes(t, b, codec, "Stopped", 100)
	wd := t.TempDir()
	ups := upCouch(ce, "b", ce.url, name, "sync", "LSGO_UP_B")
	r := rsStartRelayIn(t, bin, wd, ups, "LSGO_UP_B="+ce.password)
	want := rsDocCount(t, b)
	var got int64
	upPoll(t, "B's documents in the relay", func() bool { got = rsDocCount(t, r.db); return got == want },
		func() string { return fmt.Sprintf("%d of %d", got, want) })
	r.waitUpstream(t, "b", func(u upUpstream) bool { return upLive(u) && u.Lag == 0 })
	if code := r.p.signal(os.Interrupt); code != 0 {
		t.Fatalf("the relay exited with %d:\n%s", code, r.p.output())
	}
	ctx := ctxT(t)
	if err := b.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Create(ctx); err != nil {
		t.Fatal(err)
	}
	r = rsStartRelayIn(t, bin, wd, ups, "LSGO_UP_B="+ce.password)
	rsConverge(t, r, b, want, 1, 60*time.Second)
	if s := rsAgree(t, r, "b"); s.Resets != 1 {
		t.Fatalf("after the restart: %+v", s)
	}
	if got := rsSalt(t, b); string(got) != string(saltB) {
		t.Fatalf("B's salt: %s, want %s", rsFingerprint(got), rsFingerprint(saltB))
	}
	checkNotes(t, b, codec, notes)
}

// "The same holds for a bucket whose packs were wiped": every object of
// bucket C is deleted (packs, salt, milestone, as a rebuild does); the
// relay notices the new journal epoch, finds its last pack gone, and
// sends everything again, so a device that sets up on C afterwards reads
// every note. With packsOnly, only the packs are deleted (the salt and
// the milestone stay, so the epoch is the same): the relay finds its
// last pack gone all the same.
func testUpstreamBucketWiped(t *testing.T, bin string, packsOnly bool) {
	ce, se := couchServer(t), s3Server(t)
	name := dbName(t)
	b, codec, _ := upCouchClient(t, name)
	notes := rsNotes(t, b, codec, "Wiped", 100)
	bk, _ := freshBucket(t)
	r := upStartRelay(t, bin, "", upCouch(ce, "b", ce.url, name, "sync", "LSGO_UP_B")+upBucket(se, bk, "c", "sync", "LSGO_UP_C", ""),
		"LSGO_UP_B="+ce.password, "LSGO_UP_C="+se.secret)
	var first string
	for id := range notes {
		first = id
		break
	}
	dev := newUpDevice(t, bk, "before-the-wipe")
	upPoll(t, "the notes in the bucket", func() bool { return dev.readNote(t, first) == notes[first] }, nil)
	// Quiet first: every held note released (a release is a write the
	// relay sends on), C caught up.
	want := rsDocCount(t, b)
	var got int64
	upPoll(t, "B's documents in the relay", func() bool { got = rsDocCount(t, r.db); return got == want },
		func() string { return fmt.Sprintf("%d of %d", got, want) })
	r.waitUpstream(t, "c", func(u upUpstream) bool { return upLive(u) && u.Lag == 0 })

	if packsOnly {
		keys, err := bk.List(ctxT(t), "")
		if err != nil || len(keys) == 0 {
			t.Fatalf("the bucket's packs: %v %v", keys, err)
		}
		for _, k := range keys {
			if err := bk.Client().RemoveObject(ctxT(t), bk.Name(), k, miniogo.RemoveObjectOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	} else if n, err := bk.Reset(ctxT(t)); err != nil || n == 0 {
		t.Fatalf("wiping the bucket: %d objects, %v", n, err)
	}
	var s rsUpstream
	upPoll(t, "the relay to refill the bucket", func() bool {
		s = rsStatus(t, r, "c")
		// Both directions known: right after the wipe is noticed, the
		// pull lag is unknown (-1) and the lag counts only the push side
		// until the pass ends.
		return s.Resets >= 1 && s.State == "live" && s.Lag == 0 && s.LagPush == 0 && s.LagPull == 0
	}, func() string { return fmt.Sprintf("%+v\n%s", s, r.p.output()) })
	rsAgree(t, r, "c")
	after := newUpDevice(t, bk, "after-the-wipe")
	i := 0
	for id, text := range notes {
		if got := after.readNote(t, id); got != text {
			t.Fatalf("note %s from the wiped bucket: %q, want %q", id, got, text)
		}
		if i++; i == 20 {
			break
		}
	}
}

// rsUpstream is the part of an upstream's /status these tests read.
type rsUpstream struct {
	Name      string `json:"name"`
	State     string `json:"state"`
	Lag       int    `json:"lag"`
	LagPush   int    `json:"lag_push"`
	LagPull   int    `json:"lag_pull"`
	Resets    uint64 `json:"resets"`
	LastError string `json:"last_error"`
}

// rsStatus reads the named upstream of the database "vault" in /status.
func rsStatus(t *testing.T, r *upRelay, name string) rsUpstream {
	t.Helper()
	var s struct {
		Databases []struct {
			Upstreams []rsUpstream `json:"upstreams"`
		} `json:"databases"`
	}
	if err := json.Unmarshal(r.get(t, "/status"), &s); err != nil || len(s.Databases) != 1 {
		t.Fatalf("/status: %v", err)
	}
	for _, u := range s.Databases[0].Upstreams {
		if u.Name == name {
			return u
		}
	}
	t.Fatalf("/status has no upstream %q", name)
	return rsUpstream{}
}

// rsMetrics is the named upstream as /metrics reports it.
type rsMetrics struct {
	Up, Lag, LagPush, LagPull, Resets float64
	State                             string // the state whose gauge is 1
}

var rsMetricLine = regexp.MustCompile(`^livesync_relay_(upstream_[a-z_]+)\{([^}]*)\} (\S+)$`)

func rsReadMetrics(t *testing.T, r *upRelay, name string) rsMetrics {
	t.Helper()
	var m rsMetrics
	for line := range strings.SplitSeq(string(r.get(t, "/metrics")), "\n") {
		g := rsMetricLine.FindStringSubmatch(line)
		if g == nil || !strings.Contains(g[2], `upstream="`+name+`"`) || !strings.Contains(g[2], `db="vault"`) {
			continue
		}
		v, err := strconv.ParseFloat(g[3], 64)
		if err != nil {
			t.Fatalf("/metrics: %q", line)
		}
		switch {
		case g[1] == "upstream_up":
			m.Up = v
		case g[1] == "upstream_lag":
			m.Lag = v
		case g[1] == "upstream_lag_documents" && strings.Contains(g[2], `direction="push"`):
			m.LagPush = v
		case g[1] == "upstream_lag_documents" && strings.Contains(g[2], `direction="pull"`):
			m.LagPull = v
		case g[1] == "upstream_resets_total":
			m.Resets = v
		case g[1] == "upstream_state" && v == 1:
			m.State = regexp.MustCompile(`state="([^"]*)"`).FindStringSubmatch(g[2])[1]
		}
	}
	return m
}

// rsAgree wants /status and /metrics to report the same numbers and
// state. Each is computed when it is requested, so the two can only be
// compared while nothing moves: it reads both twice in turn and compares
// them once neither changed across the two rounds (a relay that is still
// writing, e.g. a held note released and sent on, or a pass ending, is
// read again every 50 ms, 60 s at most). Stable and different is a
// failure at once.
func rsAgree(t *testing.T, r *upRelay, name string) rsUpstream {
	t.Helper()
	s, m := rsStatus(t, r, name), rsReadMetrics(t, r, name)
	upPoll(t, "/status and /metrics to be stable", func() bool {
		s2, m2 := rsStatus(t, r, name), rsReadMetrics(t, r, name)
		stable := s2 == s && m2 == m
		if !stable {
			t.Logf("still moving: %+v, %+v then %+v, %+v", s, m, s2, m2)
		}
		s, m = s2, m2
		return stable
	}, func() string { return fmt.Sprintf("last %+v against %+v", s, m) })
	up := 0.0
	if s.State == "live" || s.State == "catching-up" {
		up = 1
	}
	if m.State != s.State || m.Lag != float64(s.Lag) || m.LagPush != float64(s.LagPush) || m.LagPull != float64(s.LagPull) ||
		m.Resets != float64(s.Resets) || m.Up != up {
		t.Fatalf("/status and /metrics disagree: %+v against %+v", s, m)
	}
	return s
}

// rsDocCount is a database's doc_count.
func rsDocCount(t *testing.T, db *couchdb.DB) int64 {
	t.Helper()
	info, err := db.Info(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return info.DocCount
}

// rsNotes writes n small notes to db (metadata and chunk each, encoded
// with codec as a client writes them) and returns their texts by id.
func rsNotes(t *testing.T, db *couchdb.DB, codec *livesync.Codec, dir string, n int) map[string]string {
	t.Helper()
	notes := map[string]string{}
	var docs []json.RawMessage
	for i := range n {
		text := fmt.Sprintf("# %s %d\nA small note.\n", dir, i)
		meta, chunks, m, _ := upRemoteNote(t, codec, fmt.Sprintf("%s/%05d.md", dir, i), text)
		docs = append(docs, chunks...)
		docs = append(docs, meta)
		notes[m.ID] = text
		if len(docs) >= 2000 {
			upPush(t, db, docs)
			docs = nil
		}
	}
	if len(docs) > 0 {
		upPush(t, db, docs)
	}
	return notes
}

// rsSalt reads a CouchDB database's vault salt (nil: none).
func rsSalt(t *testing.T, db *couchdb.DB) []byte {
	t.Helper()
	raw, err := db.GetLocal(ctxT(t), "obsidian_livesync_sync_parameters")
	if err != nil {
		return nil
	}
	p, err := negotiate.ParseSyncParameters(raw)
	if err != nil {
		t.Fatal(err)
	}
	salt, err := p.Salt()
	if err != nil {
		return nil
	}
	return salt
}

// rsFingerprint is the relay's short name for a salt.
func rsFingerprint(salt []byte) string {
	h := sha256.Sum256(salt)
	return hex.EncodeToString(h[:4])
}

// rsConverge waits (at most limit) until upstream B holds every one of
// the relay's want documents and /status says live with lag 0 after at
// least resets resets. From the moment the relay has counted the reset,
// /status must never say live with lag 0 while B is behind.
func rsConverge(t *testing.T, r *upRelay, b *couchdb.DB, want int64, resets uint64, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	var s rsUpstream
	var n int64
	samples, behind := 0, 0
	for {
		s = rsStatus(t, r, "b")
		n = rsDocCount(t, b) // read after: B can only have more than at the status
		if s.Resets >= resets {
			samples++
			if n < want {
				behind++
				if s.State == "live" && s.Lag == 0 {
					t.Fatalf("/status says live with lag 0 while B holds %d of %d documents: %+v", n, want, s)
				}
			}
			if n == want && s.State == "live" && s.Lag == 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("B holds %d of %d documents; /status %+v\n%s", n, want, s, r.p.output())
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("converged after reset %d: %d documents; %d samples, %d while B was behind", resets, n, samples, behind)
}

// "B was killed and came back empty (the database recreated) within the
// relay's backoff delay … B stayed at 0 of 7,056 documents": the relay
// notices the reset, gives B its salt back and replicates everything
// again; and again when B stays gone past the backoff and is recreated.
func testUpstreamRecreated(t *testing.T, bin string) {
	ce := couchServer(t)
	name := dbName(t)
	b, codec, saltB := upCouchClient(t, name)
	notes := rsNotes(t, b, codec, "Reset", 300)
	px := newUpProxy(t, upHostPort(ce.url))
	r := upStartRelay(t, bin, "", upCouch(ce, "b", px.url(), name, "sync", "LSGO_UP_B"), "LSGO_UP_B="+ce.password)
	r.waitUpstream(t, "b", func(u upUpstream) bool { return upLive(u) && u.Lag == 0 })
	want := rsDocCount(t, b) // the notes and the client's version document
	var got int64
	upPoll(t, "B's documents in the relay", func() bool { got = rsDocCount(t, r.db); return got == want },
		func() string { return fmt.Sprintf("%d of %d", got, want) })
	s := rsAgree(t, r, "b")
	if s.Resets != 0 {
		t.Fatalf("resets before any: %+v", s)
	}
	ctx := ctxT(t)

	// Within the backoff delay: B is unreachable, recreated empty, back.
	// While it is away the relay says so (the replicator's typed retry
	// reports, not its log), in /status and /metrics alike.
	px.setDown(true)
	down := rsWait(t, r, func(s rsUpstream) bool { return s.State == "backoff" })
	if !strings.Contains(down.LastError, "live feed failed; retrying") {
		t.Errorf("while B is away: %+v", down)
	}
	rsAgree(t, r, "b")
	if err := b.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Create(ctx); err != nil {
		t.Fatal(err)
	}
	px.setDown(false)
	rsConverge(t, r, b, want, 1, 60*time.Second)
	s = rsAgree(t, r, "b")
	if s.Resets != 1 || s.State != "live" || s.Lag != 0 {
		t.Fatalf("after the first reset: %+v", s)
	}
	if got := rsSalt(t, b); string(got) != string(saltB) {
		t.Fatalf("B's salt after the reset: %s, want %s (given back)", rsFingerprint(got), rsFingerprint(saltB))
	}
	checkNotes(t, b, codec, notes)

	// After the backoff delay: B is gone until the relay says so.
	if err := b.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	upPoll(t, "the relay to notice B is gone", func() bool {
		s := rsStatus(t, r, "b")
		return s.State != "live" && s.State != "catching-up"
	}, func() string { return fmt.Sprintf("%+v", rsStatus(t, r, "b")) })
	if err := b.Create(ctx); err != nil {
		t.Fatal(err)
	}
	rsConverge(t, r, b, want, 2, 120*time.Second)
	s = rsAgree(t, r, "b")
	if s.State != "live" || s.Lag != 0 || s.Resets < 2 {
		t.Fatalf("after the second reset: %+v", s)
	}
	if got := rsSalt(t, b); string(got) != string(saltB) {
		t.Fatalf("B's salt after the second reset: %s, want %s", rsFingerprint(got), rsFingerprint(saltB))
	}
	checkNotes(t, b, codec, notes)

	// A relay restarted on the same upstream stays put: no new reset.
	t.Logf("status: %+v", s)
}

// checkNotes reads every note from db, byte-exact.
func checkNotes(t *testing.T, db *couchdb.DB, codec *livesync.Codec, notes map[string]string) {
	t.Helper()
	n := 0
	for id, text := range notes {
		if got := upReadNote(t, db, codec, id); got != text {
			t.Fatalf("note %s reads %q, want %q", id, got, text)
		}
		if n++; n == 20 {
			return
		}
	}
}

// "If the upstream now holds a different salt, the relay refuses with an
// error saying which side holds which salt, and writes nothing."
func testUpstreamRekeyed(t *testing.T, bin string) {
	ce := couchServer(t)
	name := dbName(t)
	b, codec, saltB := upCouchClient(t, name)
	rsNotes(t, b, codec, "Rekey", 20)
	px := newUpProxy(t, upHostPort(ce.url))
	r := upStartRelay(t, bin, "", upCouch(ce, "b", px.url(), name, "sync", "LSGO_UP_B"), "LSGO_UP_B="+ce.password)
	r.waitUpstream(t, "b", func(u upUpstream) bool { return upLive(u) && u.Lag == 0 })
	ctx := ctxT(t)

	// While the relay cannot reach it, B is set up again by a client:
	// recreated, with a new salt.
	px.setDown(true)
	if err := b.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	b2, _, salt2 := upCouchClient(t, name)
	if string(salt2) == string(saltB) {
		t.Fatal("the new salt is the old one")
	}
	before := rsSnapshot(t, b2)
	px.setDown(false)

	fpOld, fpNew := rsFingerprint(saltB), rsFingerprint(salt2)
	s := rsWait(t, r, func(s rsUpstream) bool {
		return s.State == "error" && strings.Contains(s.LastError, fpOld) && strings.Contains(s.LastError, fpNew)
	})
	if strings.Contains(s.LastError, hex.EncodeToString(salt2)) || strings.Contains(s.LastError, string(salt2)) {
		t.Fatalf("the error repeats the salt: %s", s.LastError)
	}
	t.Logf("refused: %s", s.LastError)
	rsAgree(t, r, "b")
	// Nothing written, for longer than an identity check.
	end := time.Now().Add(7 * time.Second)
	for time.Now().Before(end) {
		if got := rsSnapshot(t, b2); got != before {
			t.Fatalf("the relay wrote to the re-keyed upstream: %s, was %s", got, before)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := b2.GetLocal(ctx, rsMarkerID(t, r)); err == nil {
		t.Fatal("the relay wrote its marker onto the re-keyed upstream")
	}
}

// rsSnapshot names what a client can see change on db: its documents,
// update_seq and the revisions of its sync parameters and milestone.
func rsSnapshot(t *testing.T, db *couchdb.DB) string {
	t.Helper()
	info, err := db.Info(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	out := fmt.Sprintf("docs %d seq %s", info.DocCount, info.UpdateSeq)
	for _, id := range []string{"obsidian_livesync_sync_parameters", "obsydian_livesync_milestone"} {
		raw, _ := db.GetLocal(ctxT(t), id)
		var head struct {
			Rev string `json:"_rev"`
		}
		json.Unmarshal(raw, &head)
		out += " " + id + "@" + head.Rev
	}
	return out
}

// rsMarkerID is the _local id of the relay's marker on its upstreams.
func rsMarkerID(t *testing.T, r *upRelay) string {
	var root struct {
		UUID string `json:"uuid"`
	}
	if err := json.Unmarshal(r.get(t, "/"), &root); err != nil || root.UUID == "" {
		t.Fatalf("GET /: %v", err)
	}
	h := sha256.Sum256([]byte(root.UUID + "/vault"))
	return "livesync-relay-identity-" + hex.EncodeToString(h[:8])
}

// rsWait polls upstream b's /status until ok (60 s at most).
func rsWait(t *testing.T, r *upRelay, ok func(rsUpstream) bool) rsUpstream {
	t.Helper()
	var s rsUpstream
	upPoll(t, "upstream b", func() bool { s = rsStatus(t, r, "b"); return ok(s) },
		func() string { return fmt.Sprintf("%+v\n%s", s, r.p.output()) })
	return s
}

// lagNotesDefault is the size of the lag tests' catch-ups in notes (two
// documents each). The pipelined pull takes 4,000 documents from the test
// server in about a second, which /status sampled every 10 ms sees as
// dozens of distinct lag values (4 prove the countdown); C's push lag
// still peaks in the hundreds. 10,000 documents: LIVESYNC_TEST_LAG_NOTES.
const lagNotesDefault = 2000

// "lag counts down during a catch-up": the relay pulls notes (two
// documents each; 5,000 notes for the 10,000-document version) from B;
// /status and /metrics are sampled throughout: the lag never grows,
// reaches 0, and the state is catching-up until the first pass ends,
// then live.
func testUpstreamCatchUpLag(t *testing.T, bin string, notes int) {
	ce := couchServer(t)
	name := dbName(t)
	b, codec, _ := upCouchClient(t, name)
	start := time.Now()
	rsNotes(t, b, codec, "Lag", notes)
	t.Logf("%d documents on B in %v", 2*notes, time.Since(start))
	r := upStartRelay(t, bin, "", upCouch(ce, "b", ce.url, name, "pull", "LSGO_UP_B"), "LSGO_UP_B="+ce.password)
	start = time.Now()
	type sample struct {
		state        string
		lag, metLag  int
		metricsState string
	}
	var samples []sample
	for {
		s := rsStatus(t, r, "b")
		m := rsReadMetrics(t, r, "b")
		samples = append(samples, sample{state: s.State, lag: s.Lag, metLag: int(m.Lag), metricsState: m.State})
		if s.State == "live" && s.Lag == 0 && m.Lag == 0 {
			break
		}
		if time.Since(start) > 120*time.Second {
			t.Fatalf("no catch-up in 120 s: %+v", s)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("caught up in %v, %d samples; lag at the first: %d", time.Since(start), len(samples), samples[0].lag)
	// Pulled notes whose chunks came in a later batch are held a moment
	// (the hold-back), so the count may follow the lag.
	var got int64
	want := rsDocCount(t, b) // the notes and the client's version document
	upPoll(t, "B's documents in the relay", func() bool { got = rsDocCount(t, r.db); return got == want },
		func() string { return fmt.Sprintf("%d of %d", got, want) })
	prev, prevM := -1, -1
	distinct := map[int]bool{}
	seenLive := false
	for i, s := range samples {
		if s.state == "connecting" {
			continue
		}
		if s.lag < 0 || s.metLag < 0 {
			t.Fatalf("sample %d: lag unknown while %s: %+v", i, s.state, s)
		}
		if prev >= 0 && s.lag > prev || prevM >= 0 && s.metLag > prevM {
			t.Fatalf("sample %d: lag grew: %d after %d (/metrics %d after %d)", i, s.lag, prev, s.metLag, prevM)
		}
		if s.metLag > s.lag { // /metrics is read after /status
			t.Fatalf("sample %d: /metrics lag %d above /status %d", i, s.metLag, s.lag)
		}
		if seenLive && s.state != "live" {
			t.Fatalf("sample %d: %s after live", i, s.state)
		}
		if s.state == "live" {
			seenLive = true
		} else if s.state != "catching-up" {
			t.Fatalf("sample %d: state %s during the catch-up", i, s.state)
		}
		if s.state == "live" && s.lag > 0 {
			t.Logf("sample %d: live with lag %d (the first pass is over)", i, s.lag)
		}
		prev, prevM = s.lag, s.metLag
		distinct[s.lag] = true
	}
	if len(distinct) < 4 {
		t.Fatalf("the lag did not count down: values %v over %d samples", distinct, len(samples))
	}
	rsAgree(t, r, "b")
}

// testUpstreamBucketPushLag: a bucket's lag_push counts the relay's
// documents after the journal's send position, not 0 after every pass:
// while the documents pulled from B (two per note) reach the relay, C's
// push lag is seen above 0, then reaches 0 once every one of them is in
// the relay, with /status and /metrics agreeing.
func testUpstreamBucketPushLag(t *testing.T, bin string, notes int) {
	ce, se := couchServer(t), s3Server(t)
	name := dbName(t)
	b, codec, _ := upCouchClient(t, name)
	rsNotes(t, b, codec, "PushLag", notes)
	want := rsDocCount(t, b) // the notes and the client's version document
	bk, _ := freshBucket(t)
	r := upStartRelay(t, bin, "", upCouch(ce, "b", ce.url, name, "pull", "LSGO_UP_B")+upBucket(se, bk, "c", "push", "LSGO_UP_C", ""),
		"LSGO_UP_B="+ce.password, "LSGO_UP_C="+se.secret)
	start := time.Now()
	most := 0
	for {
		// The relay's documents first. B's pull lag reaches 0 while
		// notes are still held: the test server numbers a bulk write's
		// documents by id, metadata before chunks, so metadata arrives
		// before its chunks and is released later, each release a write
		// C sends on. C's push lag read after every document is in
		// counts them all.
		n := rsDocCount(t, r.db)
		s := rsStatus(t, r, "c")
		most = max(most, s.LagPush)
		if b := rsStatus(t, r, "b"); b.State == "live" && b.Lag == 0 && n == want && s.State == "live" && s.LagPush == 0 && most > 0 {
			break
		}
		if time.Since(start) > 120*time.Second {
			t.Fatalf("C never caught up with a push lag seen (most %d; the relay holds %d of %d documents): %+v", most, n, want, s)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("C's push lag peaked at %d; caught up in %v", most, time.Since(start))
	rsAgree(t, r, "c")
}
