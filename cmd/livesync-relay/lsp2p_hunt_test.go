package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/p2p/livesyncp2p"
	"github.com/livesync-go/livesync-go/adapters/p2p/nostrrelay"
	"github.com/livesync-go/livesync-go/adapters/p2p/trysteronet"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesyncrpc"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/trystero"
)

// openHuntNode joins room "hunt-room" on the Nostr relay at url as device
// name over db, accepting the device names matching accept.
func openHuntNode(t *testing.T, url, name, accept string, db store.Store) *livesyncp2p.Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := livesyncp2p.Open(ctx, livesyncp2p.Config{
		Room: trysteronet.Config{RoomID: "hunt-room", Password: trystero.RoomPassword("hunt room passphrase"),
			Relays: []string{url}, STUN: []string{}, LoopbackOnly: true},
		Peer: livesyncrpc.Config{DB: db, DBName: livesyncrpc.DBName("vault"), DeviceName: name, AutoAccept: accept},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// The relay's hunt source fetches a device's chunks through the
// library's chunk client: each encoded into the remote form at the
// revision the device holds it, an encrypted vault's chunk unusable
// without the database's passphrase; a device that does not accept the
// relay refuses at once instead of leaving the request unanswered.
func TestLiveSyncP2PHuntSource(t *testing.T) {
	nr := nostrrelay.New(nostrrelay.Config{ForwardEphemeral: true, EventsPerMinute: 1000})
	srv := httptest.NewServer(nr)
	t.Cleanup(func() {
		_ = nr.Close()
		srv.Close()
	})
	url := "ws" + strings.TrimPrefix(srv.URL, "http")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	devDB := memStore(t)
	rev1, err := devDB.Put(ctx, json.RawMessage(`{"_id":"h:edited","type":"leaf","data":"edited once"}`))
	if err != nil {
		t.Fatal(err)
	}
	rev2, err := devDB.Put(ctx, json.RawMessage(fmt.Sprintf(`{"_id":"h:edited","_rev":%q,"type":"leaf","data":"edited once"}`, rev1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := devDB.PutChunks(ctx, []engine.Chunk{{ID: "h:+sealed", Data: "%sealed"}}); err != nil {
		t.Fatal(err)
	}
	relayNode := openHuntNode(t, url, defaultLSP2PDevice, "~.*", memStore(t))
	dev := openHuntNode(t, url, "laptop", "~^"+defaultLSP2PDevice+"$", devDB)
	stranger := openHuntNode(t, url, "stranger", "~^nobody$", memStore(t))
	for _, name := range []string{"laptop", "stranger"} {
		if _, err := relayNode.WaitPeer(ctx, name); err != nil {
			t.Fatal(err)
		}
	}

	var unusable atomic.Uint64
	src := &lsp2pSource{chunks: relayNode.ChunkClient(dev.SelfID()), codec: plainCodec(t), plain: true, unusable: &unusable}
	if !src.CanFetchDirect() || src.ThrottleKey() != livesyncp2p.ThrottlePrefix+dev.SelfID() {
		t.Fatalf("CanFetchDirect %v, ThrottleKey %q", src.CanFetchDirect(), src.ThrottleKey())
	}
	res, err := src.FetchChunks(ctx, []engine.ChunkID{"h:absent", "h:+sealed", "h:edited"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Found) != 1 || res.Found[0].ID != "h:edited" {
		t.Fatalf("found %+v", res.Found)
	}
	var doc struct {
		ID   string `json:"_id"`
		Rev  string `json:"_rev"`
		Data string `json:"data"`
		Type string `json:"type"`
	}
	if err := json.Unmarshal([]byte(res.Found[0].Data), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.ID != "h:edited" || doc.Rev != rev2 || doc.Data != "edited once" || doc.Type != "leaf" {
		t.Fatalf("the hunt got %+v, want the device's chunk at its revision %s", doc, rev2)
	}
	if strings.Join(res.Missing, ",") != "h:absent,h:+sealed" || unusable.Load() != 1 {
		t.Fatalf("missing %v, %d unusable", res.Missing, unusable.Load())
	}

	start := time.Now()
	refused := &lsp2pSource{chunks: relayNode.ChunkClient(stranger.SelfID()), codec: plainCodec(t), unusable: &unusable}
	res, err = refused.FetchChunks(ctx, []engine.ChunkID{"h:edited"})
	if !errors.Is(err, livesyncrpc.ErrRejected) || len(res.Found)+len(res.Missing) != 0 {
		t.Fatalf("an unaccepting device's chunks: %+v, %v; want ErrRejected", res, err)
	}
	// An unanswered request would take rpcroom's 40-second timeout.
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the refusal took %s", d)
	}
	t.Logf("an unaccepting device refused in %s: %v", time.Since(start), err)
}
