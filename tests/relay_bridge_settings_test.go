package tests

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/adapters/minio"
	"github.com/livesync-go/livesync-go/engine/negotiate"
)

// TestRelayBridgeSettings: with a fresh relay bridging an E2EE +
// obfuscated vault, the first livesync export from the relay and from the
// bucket is byte-exact, with no manual step; the relay's own database
// always answers with the vault's real milestone; a remote whose settings
// disagree with the vault's is an error in /status, never overwritten
// silently.
//
// The vault is imported into B (the CouchDB-protocol test server) by the
// CLI; the relay bridges B, a new bucket C, and D, a database whose
// milestone says the vault is not encrypted.
func TestRelayBridgeSettings(t *testing.T) {
	t.Parallel()
	ce, se := couchServer(t), s3Server(t)
	relayBin := buildRelay(t)
	c := &cliRunner{bin: buildCLI(t), home: t.TempDir(), couch: ce}

	// B: the vault, imported by the CLI with E2EE and path obfuscation.
	v := readVectorVault(t, "e2ee")
	inputs := dumpInputs(t, v.vaultDump)
	nameB := dbName(t)
	b := openDB(t, couchServer, nameB, true, nil)
	t.Cleanup(func() { _ = b.Destroy(ctxT(t)) })
	pass := map[string]string{"LIVESYNC_PASSPHRASE": upPassphrase}
	c.ok(t, t.TempDir(), pass, "import", writeInputs(t, v), c.url(nameB), "--encrypt", "--obfuscate-paths", "--quiet")
	infoB, err := b.Info(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	prefB := milestonePreferred(t, b.GetLocal)
	if enc, _ := prefB.Bool("encrypt"); !enc {
		t.Fatalf("B's PREFERRED after the import: %s", mustMarshal(t, prefB))
	}

	nameD := dbName(t)
	d, rawD := bridgePlainDatabase(t, nameD)

	bk, _ := freshBucket(t)
	r := upStartRelay(t, relayBin, "",
		upCouch(ce, "b", ce.url, nameB, "sync", "LSGO_UP_B")+upBucket(se, bk, "c", "sync", "LSGO_UP_C", "")+
			upCouch(ce, "d", ce.url, nameD, "sync", "LSGO_UP_B"),
		"LSGO_UP_B="+ce.password, "LSGO_UP_C="+se.secret)

	// The relay database answers with B's milestone settings.
	r.waitUpstream(t, "b", upLive)
	r.waitUpstream(t, "c", upLive)
	if got := milestonePreferred(t, r.db.GetLocal); !got.Equal(prefB) {
		t.Fatalf("the relay's PREFERRED\n%s\nwant B's\n%s", mustMarshal(t, got), mustMarshal(t, prefB))
	}
	// The bucket got them too.
	upPoll(t, "the bucket's milestone", func() bool {
		raw, err := bk.GetMilestone(ctxT(t))
		if err != nil {
			return false
		}
		m, err := negotiate.ParseMilestone(raw)
		return err == nil && m.TweakValues[negotiate.PreferredNode].Equal(prefB)
	}, nil)
	bridgeCheckRefused(t, r, d, rawD)
	bridgeWaitSent(t, r, infoB.DocCount)

	// The first export from the relay, with a throwaway replica.
	work := t.TempDir()
	relayURL := strings.Replace(r.url, "://", "://admin@", 1) + "/vault"
	env := map[string]string{"LIVESYNC_PASSPHRASE": upPassphrase, "LIVESYNC_PASSWORD": r.password}
	out := filepath.Join(work, "from-relay")
	c.ok(t, work, env, "export", relayURL, "--out", out, "--quiet")
	checkFolder(t, out, inputs, v.times)

	// The first export from the bucket.
	out = filepath.Join(work, "from-bucket")
	c.ok(t, work, s3CLIEnv(se, upPassphrase), "export", bucketURL(se, bk), "--out", out, "--quiet")
	checkFolder(t, out, inputs, v.times)

	// The exports left the vault's settings as they were.
	if got := milestonePreferred(t, r.db.GetLocal); !got.Equal(prefB) {
		t.Errorf("the relay's PREFERRED after the exports: %s", mustMarshal(t, got))
	}
	_, ups := r.status(t)
	if ups["b"].State != "live" || ups["c"].State != "live" || ups["d"].State != "error" {
		t.Errorf("states: b %s, c %s, d %s", ups["b"].State, ups["c"].State, ups["d"].State)
	}
	bridgeLockThroughRelay(t, r, b, bk, d, rawD)

	// The throttle key separates endpoint, bucket and prefix.
	ep := "http://" + se.hostPort()
	if se.secure {
		ep = "https://" + se.hostPort()
	}
	if want := ep + "," + bk.Name() + "," + bk.Prefix(); ups["c"].Hunt.ThrottleKey != want {
		t.Errorf("c's throttle key %q, want %q", ups["c"].Hunt.ThrottleKey, want)
	}
}

// bridgePlainDatabase makes D: another database whose milestone
// disagrees with the vault (not encrypted). It returns D and its
// milestone as written.
func bridgePlainDatabase(t *testing.T, nameD string) (*couchdb.DB, []byte) {
	d := openDB(t, couchServer, nameD, true, nil)
	t.Cleanup(func() { _ = d.Destroy(ctxT(t)) })
	plain := negotiate.NewVaultTweaks()
	_ = plain.Set("encrypt", false)
	_ = plain.Set("usePathObfuscation", false)
	now := time.Now()
	md := negotiate.NewMilestone("plain-device", now)
	md.Register("plain-device", negotiate.CouchDBChunkRange, negotiate.DeviceInfo{DeviceName: "plain"}, plain, now)
	if err := d.PutLocal(ctxT(t), "obsydian_livesync_milestone", mustMarshal(t, md)); err != nil {
		t.Fatal(err)
	}
	rawD, err := d.GetLocal(ctxT(t), "obsydian_livesync_milestone")
	if err != nil {
		t.Fatal(err)
	}
	return d, rawD
}

// bridgeCheckRefused checks upstream d is an error naming the keys and
// both values, and nothing was written to D.
func bridgeCheckRefused(t *testing.T, r *upRelay, d *couchdb.DB, rawD []byte) {
	ud := r.waitUpstream(t, "d", func(u upUpstream) bool { return u.State == "error" })
	for _, want := range []string{"encrypt: vault true, upstream false", "usePathObfuscation: vault true, upstream false", `upstream "d"`} {
		if !strings.Contains(ud.LastError, want) {
			t.Errorf("d's last_error lacks %q: %s", want, ud.LastError)
		}
	}
	if after, err := d.GetLocal(ctxT(t), "obsydian_livesync_milestone"); err != nil || string(after) != string(rawD) {
		t.Errorf("D's milestone was overwritten:\n%s\nwas\n%s", after, rawD)
	}
	if _, err := d.GetLocal(ctxT(t), "obsidian_livesync_sync_parameters"); err == nil {
		t.Error("D was given the vault's salt")
	}
	if info, err := d.Info(ctxT(t)); err != nil || info.DocCount != 0 {
		t.Errorf("D holds %d documents (%v), want none", info.DocCount, err)
	}
}

// bridgeWaitSent waits until B's docCount documents reached the relay
// and the relay's documents reached the bucket (upstream c).
func bridgeWaitSent(t *testing.T, r *upRelay, docCount int64) {
	upPoll(t, "B's documents on the relay", func() bool {
		info, err := r.db.Info(ctxT(t))
		return err == nil && info.DocCount >= docCount
	}, nil)
	// The journal sends what the relay holds at each poll (300 ms): done
	// when its count has not moved for 20 polls of /status.
	var pushed uint64
	still := 0
	upPoll(t, "the relay's documents in the bucket", func() bool {
		_, ups := r.status(t)
		if n := ups["c"].DocsPushed; n != pushed || n == 0 || ups["c"].State != "live" {
			pushed, still = n, 0
			return false
		}
		still++
		return still >= 20
	}, func() string { _, ups := r.status(t); return mustJSONString(ups["c"]) })
	t.Logf("B: %d documents; sent to the bucket: %d documents and chunks", docCount, pushed)
}

// bridgeLockThroughRelay: a lock written through the relay (as the
// plugin's "lock the remote" does) reaches B and the bucket, with the
// locking device's chunk range; D, which disagrees, gets nothing.
func bridgeLockThroughRelay(t *testing.T, r *upRelay, b *couchdb.DB, bk *minio.Bucket, d *couchdb.DB, rawD []byte) {
	raw, err := r.db.GetLocal(ctxT(t), "obsydian_livesync_milestone")
	if err != nil {
		t.Fatal(err)
	}
	mr, err := negotiate.ParseMilestone(raw)
	if err != nil {
		t.Fatal(err)
	}
	mr.Lock("relay-device", negotiate.CouchDBChunkRange, false)
	if err := r.db.PutLocal(ctxT(t), "obsydian_livesync_milestone", mustMarshal(t, mr)); err != nil {
		t.Fatal(err)
	}
	lockedBy := func(raw []byte) bool {
		m, err := negotiate.ParseMilestone(raw)
		if err != nil {
			return false
		}
		_, hasRange := m.NodeChunkInfo["relay-device"]
		return m.Locked && strings.Join(m.AcceptedNodes, ",") == "relay-device" && hasRange
	}
	upPoll(t, "the lock on B", func() bool {
		raw, err := b.GetLocal(ctxT(t), "obsydian_livesync_milestone")
		return err == nil && lockedBy(raw)
	}, nil)
	upPoll(t, "the lock in the bucket", func() bool {
		raw, err := bk.GetMilestone(ctxT(t))
		return err == nil && lockedBy(raw)
	}, nil)
	if after, err := d.GetLocal(ctxT(t), "obsydian_livesync_milestone"); err != nil || string(after) != string(rawD) {
		t.Errorf("D's milestone changed after the lock:\n%s", after)
	}
}

// TestRelayBridgeMissingDatabase: upstream errors name the upstream, the
// database or bucket, and the fix; the retry schedule for an error state
// is the same backoff as for a transport error, not a fixed 60 s — three
// attempts within 15 s (1 s, then 2 s apart).
func TestRelayBridgeMissingDatabase(t *testing.T) {
	t.Parallel()
	ce := couchServer(t)
	missing := dbName(t)
	r := upStartRelay(t, buildRelay(t), "", upCouch(ce, "b", ce.url, missing, "sync", "LSGO_UP_B"), "LSGO_UP_B="+ce.password)
	u := r.waitUpstream(t, "b", func(u upUpstream) bool { return u.State == "error" })
	for _, want := range []string{`database "` + missing + `"`, strings.TrimSuffix(ce.url, "/"), "create it there", `upstream "b"`} {
		if !strings.Contains(u.LastError, want) {
			t.Errorf("last_error lacks %q: %s", want, u.LastError)
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for u.Errors < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d attempts in 15 s; the error state is not retried with the backoff: %+v", u.Errors, u)
		}
		<-tick.C
		_, ups := r.status(t)
		u = ups["b"]
	}
	if u.State != "error" {
		t.Errorf("state %q after the retries", u.State)
	}
}

// milestonePreferred reads the PREFERRED tweak set of the milestone
// getLocal returns.
func milestonePreferred(t *testing.T, getLocal func(ctx context.Context, id string) (json.RawMessage, error)) negotiate.TweakValues {
	t.Helper()
	raw, err := getLocal(ctxT(t), "obsydian_livesync_milestone")
	if err != nil {
		t.Fatalf("milestone: %v", err)
	}
	m, err := negotiate.ParseMilestone(raw)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := m.TweakValues[negotiate.PreferredNode]
	if !ok {
		t.Fatalf("no PREFERRED in %s", raw)
	}
	return p
}

func mustJSONString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
