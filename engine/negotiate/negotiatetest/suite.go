package negotiatetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/negotiate"
)

// PortSuite runs the conformance tests of a negotiate.Port. newPort
// returns a port over an empty, existing database (or bucket) that the
// test may write; my is the chunk range its clients announce.
func PortSuite(t *testing.T, newPort func(t *testing.T) negotiate.Port, my negotiate.ChunkRange) {
	t.Run("Records", func(t *testing.T) { testRecords(t, newPort(t)) })
	t.Run("Handshake", func(t *testing.T) { testHandshake(t, newPort(t), my) })
	t.Run("LockUnlock", func(t *testing.T) { testLockUnlock(t, newPort(t), my) })
	t.Run("Race", func(t *testing.T) { testRace(t, newPort(t), my) })
}

// testRace: clients that run the handshake at the same time on a new
// remote end with one salt, and every one registered in the milestone
// (lost writes are redone from a fresh read).
func testRace(t *testing.T, p negotiate.Port, my negotiate.ChunkRange) {
	const n = 6
	salts := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := negotiate.HandshakeOptions{NodeID: fmt.Sprint("racer-", i), Range: my, Settings: negotiate.NewVaultTweaks()}
			var r negotiate.HandshakeResult
			r, errs[i] = negotiate.Handshake(t.Context(), p, o)
			salts[i] = r.Salt
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || !bytes.Equal(salts[i], salts[0]) || len(salts[i]) != negotiate.SaltSize {
			t.Fatalf("racer %d: %v (same salt as racer 0: %v)", i, errs[i], bytes.Equal(salts[i], salts[0]))
		}
	}
	m, err := negotiate.ReadMilestone(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, ok := m.NodeChunkInfo[fmt.Sprint("racer-", i)]; !ok {
			t.Fatalf("racer %d is not in the milestone: %v", i, m.NodeChunkInfo)
		}
	}
}

// probe reads the "probe" member of a record.
func probe(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var v struct{ Probe string }
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("record %s: %v", raw, err)
	}
	return v.Probe
}

func testRecords(t *testing.T, p negotiate.Port) {
	ctx := t.Context()
	if ok, err := p.Exists(ctx); err != nil || !ok {
		t.Fatalf("Exists = %v, %v; want true", ok, err)
	}
	if err := p.Create(ctx); err != nil {
		t.Fatalf("Create on an existing database: %v", err)
	}
	for _, r := range []negotiate.Record{negotiate.RecordSyncParameters, negotiate.RecordMilestone} {
		if _, _, err := p.Read(ctx, r); !errors.Is(err, engine.ErrNotFound) || errors.Is(err, negotiate.ErrNoDatabase) {
			t.Fatalf("Read(%s) of an absent record: %v; want engine.ErrNotFound", r, err)
		}
		v1, err := p.Write(ctx, r, json.RawMessage(`{"probe":"one"}`), "")
		if err != nil || v1 == "" {
			t.Fatalf("Write(%s) creating: %q, %v", r, v1, err)
		}
		if _, err := p.Write(ctx, r, json.RawMessage(`{"probe":"again"}`), ""); !errors.Is(err, negotiate.ErrConflict) {
			t.Fatalf("Write(%s) creating an existing record: %v; want ErrConflict", r, err)
		}
		v2, err := p.Write(ctx, r, json.RawMessage(`{"probe":"two"}`), v1)
		if err != nil || v2 == "" || v2 == v1 {
			t.Fatalf("Write(%s) at its version: %q, %v (was %q)", r, v2, err, v1)
		}
		if _, err := p.Write(ctx, r, json.RawMessage(`{"probe":"stale"}`), v1); !errors.Is(err, negotiate.ErrConflict) {
			t.Fatalf("Write(%s) at a stale version: %v; want ErrConflict", r, err)
		}
		raw, v, err := p.Read(ctx, r)
		if err != nil || v != v2 || probe(t, raw) != "two" {
			t.Fatalf("Read(%s) = %s, %q, %v; want probe two at %q", r, raw, v, err, v2)
		}
	}
	// A remote with a version document keeps it as the others; one
	// without answers not-found after a write too.
	raw, err := json.Marshal(negotiate.NewVersionDoc())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Write(ctx, negotiate.RecordVersion, raw, ""); err != nil {
		t.Fatalf("Write(version): %v", err)
	}
	switch got, _, err := p.Read(ctx, negotiate.RecordVersion); {
	case errors.Is(err, engine.ErrNotFound):
	case err != nil:
		t.Fatalf("Read(version): %v", err)
	default:
		if d, err := negotiate.ParseVersionDoc(got); err != nil || d.Version != negotiate.DatabaseVersion {
			t.Fatalf("Read(version) = %s, %v", got, err)
		}
	}
}

func testHandshake(t *testing.T, p negotiate.Port, my negotiate.ChunkRange) {
	ctx := t.Context()
	o := negotiate.HandshakeOptions{NodeID: "suite-a", Range: my, Settings: negotiate.NewVaultTweaks()}
	ro := o
	ro.ReadOnly = true
	if r, err := negotiate.Handshake(ctx, p, ro); err != nil || r.Salt != nil {
		t.Fatalf("read-only handshake of a new remote: %+v, %v", r, err)
	}
	if _, _, err := p.Read(ctx, negotiate.RecordSyncParameters); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("the read-only handshake wrote the sync parameters (%v)", err)
	}
	a, err := negotiate.Handshake(ctx, p, o)
	if err != nil || len(a.Salt) != negotiate.SaltSize {
		t.Fatalf("first handshake: %+v, %v", a, err)
	}
	o.NodeID = "suite-b"
	b, err := negotiate.Handshake(ctx, p, o)
	if err != nil || !bytes.Equal(a.Salt, b.Salt) || b.Milestone == nil {
		t.Fatalf("second handshake: salt kept %v, milestone %v, %v", bytes.Equal(a.Salt, b.Salt), b.Milestone, err)
	}
	m, err := negotiate.ReadMilestone(ctx, p)
	if err != nil || m.NodeChunkInfo["suite-a"] != my || m.NodeChunkInfo["suite-b"] != my {
		t.Fatalf("milestone %+v, %v: both nodes registered with %v", m, err, my)
	}
}

func testLockUnlock(t *testing.T, p negotiate.Port, my negotiate.ChunkRange) {
	ctx := t.Context()
	now := time.Now()
	o := negotiate.HandshakeOptions{NodeID: "owner", Range: my, Settings: negotiate.NewVaultTweaks()}
	if _, err := negotiate.Handshake(ctx, p, o); err != nil {
		t.Fatal(err)
	}
	if _, err := negotiate.Lock(ctx, p, "owner", my, false, now); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	o.NodeID = "other"
	r, err := negotiate.Handshake(ctx, p, o)
	if !errors.Is(err, negotiate.ErrNodeLocked) || !negotiate.LockedFor(r.Verdict) {
		t.Fatalf("a handshake of another node on a locked remote: %v (%v)", err, r.Verdict.Kind)
	}
	o.AllowJoin = true
	if r, err := negotiate.Handshake(ctx, p, o); err != nil || r.Verdict.Kind != negotiate.VerdictLocked {
		t.Fatalf("joining: %v (%v)", err, r.Verdict.Kind)
	}
	if was, err := negotiate.Unlock(context.WithoutCancel(ctx), p, "owner", my, now); err != nil || !was {
		t.Fatalf("Unlock = %v, %v", was, err)
	}
	if m, err := negotiate.ReadMilestone(ctx, p); err != nil || m.Locked {
		t.Fatalf("after Unlock: %+v, %v", m, err)
	}
}
