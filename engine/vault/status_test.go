package vault

import (
	"context"
	"slices"
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

func TestStatusCounts(t *testing.T) {
	ctx := t.Context()
	st := newStore(t)
	v := openVault(t, st, Options{Settings: &livesync.Settings{}})
	for _, p := range []string{"a.md", "b.md"} {
		if _, err := v.Write(ctx, p, []byte("text of "+p), WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := v.Delete(ctx, "b.md"); err != nil {
		t.Fatal(err)
	}
	// Two held files share their chunk; a third lacks another one.
	putMetaOnly(t, st, "h2.md", "shared text")
	putMetaOnly(t, st, "h1.md", "shared text")
	putMetaOnly(t, st, "h3.md", "other text")
	s, err := v.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.Docs != info.DocCount || s.Files != 4 || s.Deleted != 1 || s.MissingChunks != 2 || s.Held != 3 {
		t.Fatalf("status %+v (%d documents)", s, info.DocCount)
	}
	if want := []string{"h1.md", "h2.md", "h3.md"}; !slices.Equal(s.HeldPaths, want) {
		t.Fatalf("held paths %q, want %q", s.HeldPaths, want)
	}
	if s.Chunks != 2 {
		t.Fatalf("%d chunks: a.md and b.md keep theirs", s.Chunks)
	}
}
