package tests

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/livesync-go/livesync-go/adapters/minio"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/negotiate"
)

func bucketMilestone(t *testing.T, b *minio.Bucket) *negotiate.Milestone {
	t.Helper()
	raw, err := b.GetMilestone(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	m, err := negotiate.ParseMilestone(raw)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestS3HandshakeFreshBucket: the first handshake creates the salt and the
// milestone, later ones (this node or another) keep the salt and register
// in the milestone; only the two control objects are written, and List
// does not return them.
func TestS3HandshakeFreshBucket(t *testing.T) {
	b, _ := freshBucket(t)
	ctx := ctxT(t)
	opts := minio.HandshakeOptions{NodeID: "node-a", Settings: tweaks(t, false), Device: negotiate.DeviceInfo{DeviceName: "laptop", VaultName: "notes"}}
	salt, v, err := b.Handshake(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(salt) != negotiate.SaltSize || v.Kind != negotiate.VerdictOK {
		t.Fatalf("salt %d bytes, verdict %v", len(salt), v.Kind)
	}
	if again, _, err := b.Handshake(ctx, opts); err != nil || !bytes.Equal(again, salt) {
		t.Fatalf("second handshake: %v, same salt %v", err, bytes.Equal(again, salt))
	}
	if other, _, err := b.Handshake(ctx, minio.HandshakeOptions{NodeID: "node-b", Settings: tweaks(t, false)}); err != nil || !bytes.Equal(other, salt) {
		t.Fatalf("second node: %v, same salt %v", err, bytes.Equal(other, salt))
	}
	p, err := b.GetSyncParameters(ctx)
	if err != nil || p.ID != negotiate.SyncParametersDocID || p.Type != negotiate.TypeSyncParameters || p.ProtocolVersion != negotiate.ProtocolVersionAdvancedE2EE {
		t.Fatalf("sync parameters %+v, %v", p, err)
	}
	m := bucketMilestone(t, b)
	if m.ID != negotiate.MilestoneDocID || !slices.Equal(m.AcceptedNodes, []string{"node-a"}) ||
		m.NodeInfo["node-a"].DeviceName != "laptop" || m.NodeInfo["node-b"].LastConnected == 0 ||
		m.NodeChunkInfo["node-b"] != negotiate.JournalChunkRange {
		t.Fatalf("milestone %+v", m)
	}
	if _, ok := m.TweakValues[negotiate.PreferredNode]; !ok {
		t.Fatal("milestone has no PREFERRED tweak values")
	}
	keys, err := b.List(ctx, "")
	if err != nil || len(keys) != 0 {
		t.Fatalf("List after handshakes = %v, %v; want no packs", keys, err)
	}
	want := []string{b.Prefix() + negotiate.JournalMilestoneKey, b.Prefix() + negotiate.JournalSyncParametersKey}
	if all := allObjects(t, b); !slices.Equal(all, want) {
		t.Fatalf("objects %v, want %v", all, want)
	}
}

// TestS3HandshakeFailedReadWritesNothing: a handshake whose first read
// fails (wrong secret, unknown key, a server answering 503, a missing
// bucket) returns a typed error and writes no salt and no milestone
// (upstream created one:
// github.com/vrtmrz/obsidian-livesync/issues/1147).
func TestS3HandshakeFailedReadWritesNothing(t *testing.T) {
	good, e := freshBucket(t)
	ctx := ctxT(t)
	p := startS3FaultProxy(t, e, false)
	opts := minio.HandshakeOptions{NodeID: "n", Settings: tweaks(t, false)}
	for _, tc := range []struct {
		name  string
		mod   func(*minio.Config)
		stage engine.Stage
		msg   string
	}{
		{"wrong secret", func(c *minio.Config) { c.SecretKey += "-wrong" }, engine.StageAuth, "check the credentials"},
		{"unknown access key", func(c *minio.Config) { c.AccessKey = "lsgo-nobody" }, engine.StageAuth, "check the credentials"},
		{"server unavailable", viaProxy(p.hostPort(), false, e, nil), engine.StageTransport, "gave up after 4 attempts"},
	} {
		p.fail.Store(1000)
		bad := s3Bucket(t, e, good.Name(), good.Prefix(), tc.mod)
		salt, _, err := bad.Handshake(ctx, opts)
		wantStage(t, tc.name, err, tc.stage, tc.msg, "no salt is created")
		if salt != nil {
			t.Errorf("%s: a salt was returned", tc.name)
		}
		if strings.Contains(err.Error(), e.secret) {
			t.Errorf("%s: the message contains the secret key", tc.name)
		}
		if all := allObjects(t, good); len(all) != 0 {
			t.Fatalf("%s: the failed handshake wrote %v", tc.name, all)
		}
	}
	p.fail.Store(0)

	missing := newBucketName(e) + "-missing"
	_, _, err := s3Bucket(t, e, missing, good.Prefix(), nil).Handshake(ctx, opts)
	wantStage(t, "missing bucket", err, engine.StageStorage, fmt.Sprintf("bucket %q does not exist", missing), "create it")
	if !errors.Is(err, minio.ErrNoBucket) {
		t.Errorf("missing bucket: %v does not wrap ErrNoBucket", err)
	}
	if ok, err := good.Client().BucketExists(ctx, missing); ok || err != nil {
		t.Errorf("the handshake created bucket %s (%v)", missing, err)
	}
}

// TestS3HandshakeConcurrentFirst: several devices run their first
// handshake on an empty bucket at once, each with its own client; all end
// with the same salt (the one stored) and all are registered in the
// milestone (conditional writes, with a new round for the losers).
func TestS3HandshakeConcurrentFirst(t *testing.T) {
	b, e := freshBucket(t)
	ctx := ctxT(t)
	const n = 8
	salts := make([][]byte, n)
	errs := make([]error, n)
	clients := make([]*minio.Bucket, n)
	for i := range n {
		clients[i] = s3Bucket(t, e, b.Name(), b.Prefix(), nil)
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			salts[i], _, errs[i] = clients[i].Handshake(ctx, minio.HandshakeOptions{NodeID: fmt.Sprintf("node-%d", i), Settings: tweaks(t, false)})
		})
	}
	close(start)
	wg.Wait()
	p, err := b.GetSyncParameters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := p.Salt()
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("node-%d: %v", i, errs[i])
		}
		if !bytes.Equal(salts[i], stored) {
			t.Errorf("node-%d got a salt other than the stored one", i)
		}
	}
	m := bucketMilestone(t, b)
	for i := range n {
		if _, ok := m.NodeInfo[fmt.Sprintf("node-%d", i)]; !ok {
			t.Errorf("node-%d is missing from the milestone's node_info (a lost update)", i)
		}
	}
}

// TestS3HandshakeLocked: a bucket locked by node-a (rebuilt) refuses
// node-b with negotiate.ErrNodeLocked until node-b joins with AllowJoin; a
// cleaned lock gives ErrNodeCleaned; node-a itself proceeds as locked.
func TestS3HandshakeLocked(t *testing.T) {
	b, _ := freshBucket(t)
	ctx := ctxT(t)
	opts := func(node string) minio.HandshakeOptions {
		return minio.HandshakeOptions{NodeID: node, Settings: tweaks(t, false)}
	}
	salt, _, err := b.Handshake(ctx, opts("node-a"))
	if err != nil {
		t.Fatal(err)
	}
	lock := func(cleaned bool) {
		m := bucketMilestone(t, b)
		m.Lock("node-a", negotiate.JournalChunkRange, cleaned)
		raw, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.PutMilestone(ctx, raw); err != nil {
			t.Fatal(err)
		}
	}
	lock(false)
	got, v, err := b.Handshake(ctx, opts("node-b"))
	if !errors.Is(err, negotiate.ErrNodeLocked) || !errors.Is(err, negotiate.ErrLocked) || v.Kind != negotiate.VerdictNodeLocked {
		t.Fatalf("locked bucket, node-b: %v (verdict %v), want ErrNodeLocked", err, v.Kind)
	}
	if !strings.Contains(err.Error(), "unlock") || !bytes.Equal(got, salt) {
		t.Errorf("locked: message %q, salt returned %v", err, bytes.Equal(got, salt))
	}
	if _, v, err := b.Handshake(ctx, opts("node-a")); err != nil || v.Kind != negotiate.VerdictLocked {
		t.Fatalf("locked bucket, node-a: %v, %v; want VerdictLocked", err, v.Kind)
	}
	join := opts("node-b")
	join.AllowJoin = true
	if _, v, err := b.Handshake(ctx, join); err != nil || v.Kind != negotiate.VerdictLocked {
		t.Fatalf("node-b with AllowJoin: %v, %v; want VerdictLocked", err, v.Kind)
	}
	if m := bucketMilestone(t, b); !slices.Contains(m.AcceptedNodes, "node-b") {
		t.Fatalf("accepted_nodes %v lacks node-b after joining", m.AcceptedNodes)
	}

	lock(true)
	_, v, err = b.Handshake(ctx, opts("node-c"))
	if !errors.Is(err, negotiate.ErrNodeCleaned) || v.Kind != negotiate.VerdictNodeCleaned {
		t.Fatalf("cleaned bucket, node-c: %v (verdict %v), want ErrNodeCleaned", err, v.Kind)
	}
}

// TestS3HandshakeTweakMismatch: a device whose must-match settings differ
// from the bucket's preferred ones is refused with the differences.
func TestS3HandshakeTweakMismatch(t *testing.T) {
	b, _ := freshBucket(t)
	ctx := ctxT(t)
	if _, _, err := b.Handshake(ctx, minio.HandshakeOptions{NodeID: "plain", Settings: tweaks(t, false)}); err != nil {
		t.Fatal(err)
	}
	_, v, err := b.Handshake(ctx, minio.HandshakeOptions{NodeID: "e2ee", Settings: tweaks(t, true)})
	var tm *negotiate.TweakMismatchError
	if !errors.As(err, &tm) || len(tm.Diffs) == 0 || v.Kind != negotiate.VerdictMismatched {
		t.Fatalf("mismatched settings: %v (verdict %v), want a *TweakMismatchError", err, v.Kind)
	}
	if !strings.Contains(err.Error(), "preferred settings") {
		t.Errorf("message %q does not say what to do", err)
	}
	relaxed := minio.HandshakeOptions{NodeID: "e2ee", Settings: tweaks(t, true), Check: negotiate.CheckOptions{DisableCheckingConfigMismatch: true}}
	if _, _, err := b.Handshake(ctx, relaxed); err != nil {
		t.Fatalf("with the mismatch check off: %v", err)
	}
}

// TestS3HandshakeExistingSyncParameters: a salt-less object is filled
// (its other members kept); a malformed one or one with a bad salt is an
// error and is left as it is.
func TestS3HandshakeExistingSyncParameters(t *testing.T) {
	b, e := freshBucket(t)
	ctx := ctxT(t)
	opts := minio.HandshakeOptions{NodeID: "n", Settings: tweaks(t, false)}
	key := b.Prefix() + negotiate.JournalSyncParametersKey
	if err := b.Put(ctx, key, []byte(`{"_id":"_local/obsidian_livesync_sync_parameters","type":"sync-parameters","protocolVersion":2,"pbkdf2salt":"","note":"kept"}`)); err != nil {
		t.Fatal(err)
	}
	salt, _, err := b.Handshake(ctx, opts)
	if err != nil || len(salt) != negotiate.SaltSize {
		t.Fatalf("salt-less object: %d bytes, %v", len(salt), err)
	}
	raw, err := b.Get(ctx, key)
	if err != nil || !bytes.Contains(raw, []byte(`"note":"kept"`)) {
		t.Fatalf("filled object %s, %v", raw, err)
	}

	for name, body := range map[string]string{
		"not json":   `not json`,
		"short salt": `{"_id":"_local/obsidian_livesync_sync_parameters","type":"sync-parameters","protocolVersion":2,"pbkdf2salt":"AAAA"}`,
	} {
		x := s3Bucket(t, e, b.Name(), strings.ReplaceAll(name, " ", "-")+"/", nil)
		k := x.Prefix() + negotiate.JournalSyncParametersKey
		if err := x.Put(ctx, k, []byte(body)); err != nil {
			t.Fatal(err)
		}
		_, _, err := x.Handshake(ctx, opts)
		wantStage(t, name, err, engine.StageDecode)
		if !errors.Is(err, engine.ErrMalformed) {
			t.Errorf("%s: %v does not wrap ErrMalformed", name, err)
		}
		if got, err := x.Get(ctx, k); err != nil || string(got) != body {
			t.Errorf("%s: the object became %q (%v)", name, got, err)
		}
		if _, err := x.GetMilestone(ctx); !errors.Is(err, engine.ErrNotFound) {
			t.Errorf("%s: a milestone was written: %v", name, err)
		}
	}
}
