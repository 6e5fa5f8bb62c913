package p2ptest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/livesync-go/livesync-go/adapters/p2p"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/docid"
	"github.com/livesync-go/livesync-go/engine/hold"
	"github.com/livesync-go/livesync-go/engine/hunt"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// countingChunks is a served peer's chunk reader that records what the
// chunks protocol asks of it: every request's ids and the most requests
// served at once.
type countingChunks struct {
	p2p.ChunkReader
	mu       sync.Mutex
	now, max int
	requests [][]engine.ChunkID
	asked    map[engine.ChunkID]int
}

func (c *countingChunks) GetChunks(ctx context.Context, ids []engine.ChunkID) (map[engine.ChunkID]engine.Chunk, error) {
	c.mu.Lock()
	c.now++
	c.max = max(c.max, c.now)
	c.requests = append(c.requests, append([]engine.ChunkID(nil), ids...))
	for _, id := range ids {
		c.asked[id]++
	}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.now--
		c.mu.Unlock()
	}()
	return c.ChunkReader.GetChunks(ctx, ids)
}

// copyDocs writes the documents of src (every revision's history) into
// dst as a replication would, but for those skip names.
func copyDocs(ctx context.Context, src, dst store.Store, skip func(id string) bool) error {
	infos, err := src.AllDocs(ctx, store.AllDocsOptions{})
	if err != nil {
		return err
	}
	var docs []json.RawMessage
	for _, in := range infos {
		if docid.IsSystemID(in.ID) || skip(in.ID) {
			continue
		}
		raw, err := src.Get(ctx, in.ID, store.GetOptions{Revs: true})
		if err != nil {
			return err
		}
		docs = append(docs, raw)
	}
	res, err := dst.BulkDocs(ctx, docs)
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Error != "" {
			return fmt.Errorf("%s: %s", r.ID, r.Error)
		}
	}
	return nil
}

// A note held on alpha (its metadata, none of its chunks) is completed by
// alpha's hunt from beta and gamma, which each hold half of its chunks:
// both are asked, each finds exactly its half, no id is asked twice of
// the same peer, and the hunt keeps to its per-source limits (requests
// in the window, requests in flight, ids per request), as both the
// hunt's counters and the serving peers' meters and readers show.
func TestHuntAcrossPeers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	s := settings()

	// The note, written once, then spread: alpha gets the metadata, beta
	// and gamma every other chunk each.
	ost := memStore(t, "origin")
	ov := openVault(t, ost, s, "origin")
	var text strings.Builder
	for i := range 400 {
		fmt.Fprintf(&text, "line %03d of a long note: %x\n", i, i*7919)
	}
	note, err := ov.Write(ctx, "long.md", []byte(text.String()), vault.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ids := vault.Distinct(hold.FromMeta(note.Meta).Chunks)
	if len(ids) < 8 {
		t.Fatalf("the note has %d chunks; the test needs at least 8", len(ids))
	}
	half := map[string]int{} // chunk id -> 0 (beta's) or 1 (gamma's)
	for i, id := range ids {
		half[string(id)] = i % 2
	}
	notHalf := func(h int) func(string) bool {
		return func(id string) bool { n, ok := half[id]; return ok && n != h }
	}

	key, aid := newKey(t)
	ast := memStore(t, "alpha")
	av := openVault(t, ast, s, "alpha")
	if err := copyDocs(ctx, ost, ast, docid.IsChunkID); err != nil {
		t.Fatal(err)
	}
	held, err := av.Held(ctx)
	if err != nil || len(held) != 1 || len(held[0].Missing) != len(ids) {
		t.Fatalf("alpha holds %+v (%v); want the note held with all %d chunks missing", held, err, len(ids))
	}

	type holder struct {
		name   string
		id     peer.ID
		chunks *countingChunks
		meter  *p2p.Meter
		link   *vault.Link
	}
	h := newHost(t, key)
	var holders []*holder
	for i, name := range []string{"beta", "gamma"} {
		st := memStore(t, name)
		v := openVault(t, st, s, name)
		if err := copyDocs(ctx, ost, st, notHalf(i)); err != nil {
			t.Fatal(err)
		}
		served := *p2p.ServedVault(v, groupName, s)
		cc := &countingChunks{ChunkReader: served.Chunks, asked: map[engine.ChunkID]int{}}
		served.Chunks = cc
		allow := p2p.NewAllowList()
		allow.Allow(aid, "alpha")
		meter := p2p.NewMeter()
		sh := newHost(t, nil)
		t.Cleanup(p2p.Serve(sh, p2p.ServeConfig{DB: served, Allow: allow, Meter: meter}))
		l, err := av.Attach(ctx, p2p.NewRemote(h, addrInfo(sh), p2p.RemoteOptions{Group: groupName}), attachOptions(vaultPassphrase))
		if err != nil {
			t.Fatalf("alpha attaches %s: %v", name, err)
		}
		holders = append(holders, &holder{name: name, id: sh.ID(), chunks: cc, meter: meter, link: l})
	}

	cfg := hunt.Config{MaxInFlight: 2, MaxPerWindow: 12, BatchSize: 3}
	res, err := av.Hunt(ctx, vault.HuntOptions{Once: true, Config: &cfg})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Released) != 1 || len(res.Held) != 0 {
		t.Fatalf("the hunt released %d and left %d held (%+v); want the note released", len(res.Released), len(res.Held), res.Held)
	}
	data, err := av.Read(ctx, "long.md")
	if err != nil || string(data) != text.String() {
		t.Fatalf("alpha reads the note: %d bytes, %v; want the %d bytes written", len(data), err, text.Len())
	}

	for i, hd := range holders {
		var src *vault.HuntSource
		for j := range res.Sources {
			if res.Sources[j].Remote == hd.link.ID() {
				src = &res.Sources[j]
			}
		}
		if src == nil || !src.CanFetch || src.Key != hd.id.String() {
			t.Fatalf("%s as a hunt source: %+v; want it fetching by id, keyed by its peer id %s", hd.name, src, hd.id)
		}
		st := res.Stats.Sources[src.Key]
		mine := 0
		for _, id := range ids {
			if half[string(id)] == i {
				mine++
			}
		}
		if st.Requests == 0 || st.Chunks != uint64(mine) {
			t.Errorf("%s: %d requests found %d chunks; want its half, %d", hd.name, st.Requests, st.Chunks, mine)
		}
		if st.Requests > uint64(cfg.MaxPerWindow) || st.Failed != 0 {
			t.Errorf("%s: %d requests (%d failed); the window allows %d", hd.name, st.Requests, st.Failed, cfg.MaxPerWindow)
		}
		hd.chunks.mu.Lock()
		requests, most := hd.chunks.requests, hd.chunks.max
		for id, n := range hd.chunks.asked {
			if n > 1 {
				t.Errorf("%s was asked %d times for %s", hd.name, n, id)
			}
		}
		for _, id := range ids {
			if half[string(id)] == i && hd.chunks.asked[id] != 1 {
				t.Errorf("%s was asked %d times for %s, one of its own", hd.name, hd.chunks.asked[id], id)
			}
		}
		hd.chunks.mu.Unlock()
		if uint64(len(requests)) != st.Requests {
			t.Errorf("%s served %d requests, the hunt counted %d", hd.name, len(requests), st.Requests)
		}
		for _, r := range requests {
			if len(r) > cfg.BatchSize {
				t.Errorf("%s was asked for %d ids at once; the batch size is %d", hd.name, len(r), cfg.BatchSize)
			}
		}
		if most > cfg.MaxInFlight {
			t.Errorf("%s served %d requests at once; the hunt allows %d in flight", hd.name, most, cfg.MaxInFlight)
		}
		c := hd.meter.Snapshot()[aid]
		if c.ChunkRequests != st.Requests || c.ChunksOut != uint64(mine) {
			t.Errorf("%s's meter for alpha: %d chunk requests, %d chunks out; want %d and %d", hd.name, c.ChunkRequests, c.ChunksOut, st.Requests, mine)
		}
	}
}
