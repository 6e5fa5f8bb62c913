package vault

import (
	"context"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/engine/journal"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/vault/vaulttest"
)

func TestStatusQuarantinedPack(t *testing.T) {
	ctx := t.Context()
	r := vaulttest.NewJournal("mem://bucket/vault", true)
	a := newDevice(t, Options{Settings: &livesync.Settings{}})
	la := a.attach(t, r, AttachOptions{Create: true})
	a.write(t, "a.md", "alpha")
	if _, err := a.v.Push(ctx, la, SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	bad := journal.PackKey(r.Objects().Prefix(), time.Now().Add(time.Hour).UnixMilli())
	if err := r.Objects().Put(ctx, bad, []byte("not a pack")); err != nil {
		t.Fatal(err)
	}
	b := newDevice(t, Options{})
	lb := b.attach(t, r, AttachOptions{})
	res, err := b.v.Pull(ctx, lb, SyncOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Quarantined) != 1 || res.Quarantined[0].Key != bad || !res.NewlyQuarantined(res.Quarantined[0]) {
		t.Fatalf("quarantined %+v", res.Quarantined)
	}
	quarantined := 0
	for _, e := range b.ev.ev {
		if e.Kind == PackQuarantined && e.Quarantine.Key == bad {
			quarantined++
		}
	}
	if quarantined != 1 {
		t.Fatalf("%d PackQuarantined events", quarantined)
	}
	// Status reads the quarantine from the replica alone.
	b.v.Detach(lb)
	st, err := b.v.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rs := st.Remotes[r.ID()]
	if len(rs.Quarantined) != 1 || rs.Attached || rs.LastPull.IsZero() || st.Held != 0 {
		t.Fatalf("status %+v", st)
	}
}
