package negotiate_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/negotiate/negotiatetest"
)

// newPort returns an empty in-memory port whose database exists and
// whose Progress is "42".
func newPort() *negotiatetest.MemPort {
	p := negotiatetest.NewMemPort(false)
	p.ProgressValue = "42"
	return p
}

func opts(node string) negotiate.HandshakeOptions {
	return negotiate.HandshakeOptions{NodeID: node, Range: negotiate.CouchDBChunkRange,
		Settings: negotiate.NewVaultTweaks(), CreateIfMissing: true,
		Now: func() time.Time { return time.UnixMilli(1_700_000_000_000) }}
}

func TestHandshakeCreatesAndKeepsSalt(t *testing.T) {
	ctx := context.Background()
	p := newPort()
	p.SetExists(false)
	r, err := negotiate.Handshake(ctx, p, opts("a"))
	if err != nil || len(r.Salt) != negotiate.SaltSize || !r.Exists || r.Milestone != nil {
		t.Fatalf("first handshake: %+v, %v", r, err)
	}
	if p.Doc(negotiate.RecordVersion) == nil {
		t.Fatal("no version document written")
	}
	r2, err := negotiate.Handshake(ctx, p, opts("b"))
	if err != nil || string(r2.Salt) != string(r.Salt) || r2.Milestone == nil {
		t.Fatalf("second handshake: %+v, %v", r2, err)
	}
	m, err := negotiate.ReadMilestone(ctx, p)
	if err != nil || m.NodeInfo["b"].Progress != "42" {
		t.Fatalf("milestone %+v, %v: want b registered with the port's progress", m, err)
	}
}

func TestHandshakeMissingDatabase(t *testing.T) {
	p := newPort()
	p.SetExists(false)
	o := opts("a")
	o.CreateIfMissing = false
	if _, err := negotiate.Handshake(context.Background(), p, o); !errors.Is(err, negotiate.ErrNoDatabase) || !errors.Is(err, engine.ErrNoDatabase) || !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("missing database: %v", err)
	}
	o.CreateIfMissing, o.ReadOnly = true, true
	r, err := negotiate.Handshake(context.Background(), p, o)
	if exists, _ := p.Exists(context.Background()); err != nil || r.Exists || exists || p.Writes() != 0 {
		t.Fatalf("read-only on a missing database: %+v, %v (created %v, %d writes)", r, err, exists, p.Writes())
	}
}

// A failed read never creates a salt; a missing database is no proof
// that the sync parameters are absent either.
func TestHandshakeFailedReadWritesNothing(t *testing.T) {
	for _, readErr := range []error{
		&engine.Error{Op: "read", Stage: engine.StageAuth, Err: errors.New("401")},
		fmt.Errorf("bucket gone: %w: %w", negotiate.ErrNoDatabase, engine.ErrNotFound),
	} {
		p := newPort()
		p.ReadErr = readErr
		r, err := negotiate.Handshake(context.Background(), p, opts("a"))
		if err == nil || r.Salt != nil || p.Writes() != 0 || p.Records() != 0 {
			t.Fatalf("%v: %+v, %v, %d writes", readErr, r, err, p.Writes())
		}
	}
}

// A salt created by another client at the same time wins: it is read back.
func TestHandshakeSaltRaceReadsBack(t *testing.T) {
	p := newPort()
	theirs := make([]byte, negotiate.SaltSize)
	theirs[0] = 9
	p.BeforeWrite = func(r negotiate.Record) error {
		if r == negotiate.RecordSyncParameters && p.Doc(r) == nil {
			raw, _ := json.Marshal(negotiate.NewSyncParameters(theirs))
			p.Put(r, raw)
		}
		return nil
	}
	r, err := negotiate.Handshake(context.Background(), p, opts("a"))
	if err != nil || string(r.Salt) != string(theirs) {
		t.Fatalf("salt race: %v, %v; want the other client's salt", r.Salt, err)
	}
}

func TestHandshakeReadOnlyWritesNothing(t *testing.T) {
	p := newPort()
	o := opts("a")
	o.ReadOnly = true
	r, err := negotiate.Handshake(context.Background(), p, o)
	if err != nil || r.Salt != nil || p.Writes() != 0 {
		t.Fatalf("read-only: %+v, %v, %d writes", r, err, p.Writes())
	}
}

func TestHandshakeVersion(t *testing.T) {
	ctx := context.Background()
	p := newPort()
	p.Put(negotiate.RecordVersion, json.RawMessage(`{"_id":"obsydian_livesync_version","type":"versioninfo","version":10}`))
	if _, err := negotiate.Handshake(ctx, p, opts("a")); err != nil {
		t.Fatal(err)
	}
	var v negotiate.VersionDoc
	raw, ver, _ := p.Read(ctx, negotiate.RecordVersion)
	if err := json.Unmarshal(raw, &v); err != nil || v.Version != negotiate.DatabaseVersion || ver != "2" {
		t.Fatalf("version not bumped once: %s at %s", raw, ver)
	}
	p.Put(negotiate.RecordVersion, json.RawMessage(`{"_id":"obsydian_livesync_version","type":"versioninfo","version":99}`))
	if _, err := negotiate.Handshake(ctx, p, opts("a")); !errors.Is(err, negotiate.ErrIncompatible) {
		t.Fatalf("newer version: %v, want ErrIncompatible", err)
	}
	q := negotiatetest.NewMemPort(true) // a journal bucket: no version document
	if _, err := negotiate.Handshake(ctx, q, opts("a")); err != nil {
		t.Fatalf("a remote without a version document: %v", err)
	}
}

// Lost races on the milestone are redone from a fresh read, the same for
// every remote, and give up after MilestoneTries rounds.
func TestUpdateMilestoneRetriesRaces(t *testing.T) {
	ctx := context.Background()
	now := time.UnixMilli(1_700_000_000_000)
	for _, losses := range []int{3, negotiate.MilestoneTries} {
		p := newPort()
		lost := 0
		p.BeforeWrite = func(r negotiate.Record) error {
			if r == negotiate.RecordMilestone && lost < losses {
				lost++
				m := negotiate.NewMilestone(fmt.Sprint("other-", lost), now)
				raw, _ := json.Marshal(m)
				p.Put(r, raw)
			}
			return nil
		}
		calls := 0
		_, err := negotiate.UpdateMilestone(ctx, p, "me", now, func(m *negotiate.Milestone, _ bool) (bool, error) {
			calls++
			m.Lock("me", negotiate.CouchDBChunkRange, false)
			return true, nil
		})
		switch {
		case losses < negotiate.MilestoneTries && (err != nil || calls != losses+1):
			t.Fatalf("%d lost rounds: %v after %d calls", losses, err, calls)
		case losses == negotiate.MilestoneTries && !errors.Is(err, negotiate.ErrMilestoneRace):
			t.Fatalf("always losing: %v, want ErrMilestoneRace", err)
		}
	}
}

func TestLockJoinUnlock(t *testing.T) {
	ctx := context.Background()
	now := time.UnixMilli(1_700_000_000_000)
	p := newPort()
	if _, err := negotiate.Handshake(ctx, p, opts("owner")); err != nil {
		t.Fatal(err)
	}
	if _, err := negotiate.Lock(ctx, p, "owner", negotiate.CouchDBChunkRange, false, now); err != nil {
		t.Fatal(err)
	}
	r, err := negotiate.Handshake(ctx, p, opts("other"))
	if !errors.Is(err, negotiate.ErrNodeLocked) || !negotiate.LockedFor(r.Verdict) {
		t.Fatalf("locked remote: %v (%v)", err, r.Verdict.Kind)
	}
	if got := negotiate.AcceptedDevices(r.Milestone); len(got) != 1 || got[0] != "owner" {
		t.Fatalf("accepted devices %v", got)
	}
	if err := negotiate.Join(ctx, p, "other", negotiate.CouchDBChunkRange, now); err != nil {
		t.Fatal(err)
	}
	if r, err := negotiate.Handshake(ctx, p, opts("other")); err != nil || r.Verdict.Kind != negotiate.VerdictLocked {
		t.Fatalf("after join: %v (%v)", err, r.Verdict.Kind)
	}
	if was, err := negotiate.Unlock(ctx, p, "owner", negotiate.CouchDBChunkRange, now); err != nil || !was {
		t.Fatalf("unlock: %v, %v", was, err)
	}
	writes := p.Writes()
	if was, err := negotiate.Unlock(ctx, p, "owner", negotiate.CouchDBChunkRange, now); err != nil || was || p.Writes() != writes {
		t.Fatalf("unlocking an unlocked remote: %v, %v, %d writes", was, err, p.Writes()-writes)
	}
}
