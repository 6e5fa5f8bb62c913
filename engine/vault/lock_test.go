package vault

import (
	"context"
	"errors"
	"testing"

	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/vault/vaulttest"
)

func TestLockUnlock(t *testing.T) {
	ctx := t.Context()
	r := vaulttest.NewRemote("mem://couch/db")
	a := newDevice(t, Options{Settings: &livesync.Settings{}})
	la := a.attach(t, r, AttachOptions{Create: true})
	if err := a.v.Lock(ctx, la); err != nil {
		t.Fatal(err)
	}
	m, err := la.Milestone(ctx)
	node, _ := a.v.NodeID(ctx)
	if err != nil || !m.Locked || len(m.AcceptedNodes) != 1 || m.AcceptedNodes[0] != node {
		t.Fatalf("milestone %+v, %v", m, err)
	}
	if was, err := a.v.Unlock(ctx, la); err != nil || !was {
		t.Fatalf("Unlock = %v, %v", was, err)
	}
	if was, err := a.v.Unlock(ctx, la); err != nil || was {
		t.Fatalf("second Unlock = %v, %v", was, err)
	}
}

func TestRebuild(t *testing.T) {
	for name, newRemote := range remotes() {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			r := newRemote()
			a := newDevice(t, Options{Settings: &livesync.Settings{}})
			la := a.attach(t, r, AttachOptions{Create: true})
			a.write(t, "old.md", "from a")
			if _, err := a.v.Push(ctx, la, SyncOptions{}); err != nil {
				t.Fatal(err)
			}
			params := func() string {
				raw, _, _ := r.Port().Read(ctx, negotiate.RecordSyncParameters)
				return string(raw)
			}
			before := params()

			b := newDevice(t, Options{Settings: &livesync.Settings{}})
			b.write(t, "new.md", "from b")
			var plan RebuildPlan
			res, err := b.v.Rebuild(ctx, r, RebuildOptions{Confirm: func(_ context.Context, p RebuildPlan) error { plan = p; return nil }})
			if err != nil {
				t.Fatal(err)
			}
			if !plan.Existing || plan.Docs == 0 || res.Pushed == 0 {
				t.Fatalf("plan %+v, result %+v", plan, res)
			}
			if params() == before {
				t.Fatal("the rebuilt remote kept its salt")
			}
			// a holds documents from before: refused.
			a2 := newDevice(t, Options{Settings: &livesync.Settings{}})
			a2.write(t, "stale.md", "x")
			if _, err := a2.v.Attach(ctx, r, AttachOptions{}); !errors.Is(err, negotiate.ErrNodeLocked) {
				t.Fatalf("a stale replica attached to the rebuilt remote: %v", err)
			}
			// A fresh device joins and gets b's file, not a's.
			c := newDevice(t, Options{})
			lc := c.attach(t, r, AttachOptions{})
			if _, err := c.v.Pull(ctx, lc, SyncOptions{}); err != nil {
				t.Fatal(err)
			}
			if got := c.read(t, "new.md"); got != "from b" {
				t.Fatalf("read %q", got)
			}
			if _, err := c.v.Stat(ctx, "old.md"); err == nil {
				t.Fatal("the reset left a's file")
			}
		})
	}
}

func TestRebuildRefusals(t *testing.T) {
	ctx := t.Context()
	// A remote this device cannot read is never changed.
	r := vaulttest.NewRemote("mem://couch/db")
	a := newDevice(t, Options{Settings: &livesync.Settings{Encrypt: true, Passphrase: "right"}})
	la := a.attach(t, r, AttachOptions{Create: true})
	a.write(t, "a.md", "x")
	if _, err := a.v.Push(ctx, la, SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	b := newDevice(t, Options{Settings: &livesync.Settings{Encrypt: true, Passphrase: "wrong"}})
	confirmed := false
	_, err := b.v.Rebuild(ctx, r, RebuildOptions{Confirm: func(context.Context, RebuildPlan) error { confirmed = true; return nil }})
	if !errors.As(err, new(*PassphraseError)) || confirmed {
		t.Fatalf("Rebuild with a wrong passphrase: %v (confirm asked: %v)", err, confirmed)
	}
	if m, _ := la.Milestone(ctx); m == nil || m.Locked {
		t.Fatalf("the remote was locked: %+v", m)
	}

	// A database with documents but no sync parameters is not a vault.
	other := vaulttest.NewRemote("mem://couch/other")
	if _, err := other.Store().Put(ctx, []byte(`{"_id":"unrelated"}`)); err != nil {
		t.Fatal(err)
	}
	enc := &livesync.Settings{Encrypt: true}
	if _, err := b.v.Rebuild(ctx, other, RebuildOptions{NewVault: enc}); !errors.Is(err, ErrNotAVault) {
		t.Fatalf("Rebuild of a foreign database: %v", err)
	}
}
