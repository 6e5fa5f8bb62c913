//go:build !js

package p2ptest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/livesync-go/livesync-go/adapters/p2p"
	"github.com/livesync-go/livesync-go/adapters/p2p/discovery"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// A peer in the room that the vault peer did not approve gets nothing:
// its sync is refused (ErrRefused, promptly), its vault stays empty, a
// chunk asked by id is refused too, the vault peer served it no document
// or chunk, and the vault peer lists it as pending.
func TestUnapprovedPeerGetsNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	url := startNostrRelay(t)
	room, err := discovery.NewRoom(groupName, groupPassphrase)
	if err != nil {
		t.Fatal(err)
	}
	s := settings()
	alpha := newMember(t, "alpha", memStore(t, "alpha"))
	alpha.v = openVault(t, alpha.st, s, "alpha")
	res, err := alpha.v.Write(ctx, "secret.md", []byte("# not for strangers\n"), vault.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	outsider := newMember(t, "outsider", memStore(t, "outsider"))
	outsider.v = openVault(t, outsider.st, s, "outsider")
	// The outsider trusts alpha; alpha never approved the outsider.
	if err := outsider.book.Approve(alpha.id, "alpha"); err != nil {
		t.Fatal(err)
	}
	alpha.join(t, room, url, p2p.ServedVault(alpha.v, groupName, s))
	outsider.join(t, room, url, p2p.ServedVault(outsider.v, groupName, s))

	start := time.Now()
	out, err := p2p.SyncVault(ctx, outsider.v, outsider.g, p2p.VaultSyncOptions{Wait: 10 * time.Second, Attach: attachOptions(vaultPassphrase)})
	refused := errors.Is(err, p2p.ErrRefused)
	for id, ferr := range out.Failed {
		if id == alpha.id && errors.Is(ferr, p2p.ErrRefused) {
			refused = true
		}
	}
	if !refused {
		t.Fatalf("the outsider's sync: %+v, %v; want alpha's refusal (ErrRefused)", out, err)
	}
	if slices.Contains(out.Peers, alpha.id) {
		t.Errorf("the outsider's sync lists alpha as synced: %v", out.Peers)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("the refusal took %v", d)
	}
	files, err := outsider.v.List(ctx, "", vault.ListOptions{Deleted: true})
	if err != nil || len(files) != 0 {
		t.Errorf("the outsider's vault holds %d files (%v); want none", len(files), err)
	}

	// Nor does the chunks protocol serve it.
	src := p2p.NewChunkClient(outsider.h, addrInfo(alpha.h), 5*time.Second)
	got, err := src.FetchChunks(ctx, []engine.ChunkID{engine.ChunkID(res.Meta.Children[0])})
	if !errors.Is(err, p2p.ErrRefused) || len(got.Found) != 0 {
		t.Errorf("the outsider's chunk request: %+v, %v; want ErrRefused and nothing", got, err)
	}

	eventually(t, 10*time.Second, "alpha lists the outsider as pending", func() (bool, string) {
		var pending []peer.ID
		for _, e := range alpha.book.Pending() {
			pending = append(pending, e.ID)
		}
		return slices.Contains(pending, outsider.id), fmt.Sprintf("pending %v", pending)
	})
	for _, p := range alpha.g.Peers() {
		if p.ID == outsider.id && p.Approved {
			t.Errorf("alpha's group lists the outsider as approved")
		}
	}
	if slices.ContainsFunc(alpha.book.Approved(), func(e p2p.PeerEntry) bool { return e.ID == outsider.id }) {
		t.Errorf("alpha's book approved the outsider")
	}
	c := alpha.g.Meter().Snapshot()[outsider.id]
	if c.DocsOut != 0 || c.ChunksOut != 0 {
		t.Errorf("alpha served the outsider %d documents and %d chunks", c.DocsOut, c.ChunksOut)
	}
}
