//go:build !js

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
	"github.com/livesync-go/livesync-go/adapters/p2p/discovery"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/docid"
	"github.com/livesync-go/livesync-go/engine/hold"
	"github.com/livesync-go/livesync-go/engine/hunt"
	"github.com/livesync-go/livesync-go/engine/replicate"
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
	starts   []time.Time
	asked    map[engine.ChunkID]int
}

func (c *countingChunks) GetChunks(ctx context.Context, ids []engine.ChunkID) (map[engine.ChunkID]engine.Chunk, error) {
	c.mu.Lock()
	c.now++
	c.max = max(c.max, c.now)
	c.requests = append(c.requests, append([]engine.ChunkID(nil), ids...))
	c.starts = append(c.starts, time.Now())
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

// Notes held on alpha (their metadata, none of their chunks) are
// completed by alpha's hunt from beta and gamma, which each hold half of
// their chunks:
// both are asked, each finds exactly its half, no id is asked twice of
// the same peer, and the hunt keeps to its per-source limits (requests
// in the window, requests in flight, ids per request), as both the
// hunt's counters and the serving peers' meters and readers show.
func TestHuntAcrossPeers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	s := settings()

	// The notes, written once, then spread: alpha gets the metadata,
	// beta and gamma every other chunk each. Three notes, so that the
	// hunt has requests to run side by side and its in-flight bound
	// binds.
	ost := memStore(t, "origin")
	texts, ids := writeLongNotes(t, ctx, openVault(t, ost, s, "origin"), 3)
	half := map[string]int{} // chunk id -> 0 (beta's) or 1 (gamma's)
	for i, id := range ids {
		half[id] = i % 2
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
	missing := 0
	for _, f := range held {
		missing += len(f.Missing)
	}
	if err != nil || len(held) != len(texts) || missing != len(ids) {
		t.Fatalf("alpha holds %+v (%v); want the notes held with all %d chunks missing", held, err, len(ids))
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

	// Limits that bind: more requests than one window allows, so the
	// hunt must pace them.
	cfg := hunt.Config{MaxInFlight: 2, MaxPerWindow: 6, Window: 500 * time.Millisecond, BatchSize: 5}
	res, err := av.Hunt(ctx, vault.HuntOptions{Once: true, Config: &cfg})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Released) != len(texts) || len(res.Held) != 0 {
		t.Fatalf("the hunt released %d and left %d held (%+v); want the notes released", len(res.Released), len(res.Held), res.Held)
	}
	for path, text := range texts {
		data, err := av.Read(ctx, path)
		if err != nil || string(data) != text {
			t.Fatalf("alpha reads %s: %d bytes, %v; want the %d bytes written", path, len(data), err, len(text))
		}
	}

	for i, hd := range holders {
		mine := 0
		for _, id := range ids {
			if half[id] == i {
				mine++
			}
		}
		hd.check(t, res, cfg, aid, ids, func(id string) bool { return half[id] == i }, mine)
	}
}

// writeLongNotes writes n notes of many chunks into v and returns their
// texts by path and their distinct chunk ids.
func writeLongNotes(t *testing.T, ctx context.Context, v *vault.Vault, n int) (map[string]string, []string) {
	t.Helper()
	texts := map[string]string{}
	var ids []string
	for k := range n {
		var text strings.Builder
		for i := range 300 {
			fmt.Fprintf(&text, "line %03d of long note %d: %x\n", i, k, (i+1)*(k+3)*7919)
		}
		path := fmt.Sprintf("long-%d.md", k)
		note, err := v.Write(ctx, path, []byte(text.String()), vault.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		texts[path] = text.String()
		ids = append(ids, hold.FromMeta(note.Meta).Chunks...)
	}
	ids = vault.Distinct(ids)
	if len(ids) < 16*n {
		t.Fatalf("the notes have %d chunks; the test needs at least %d", len(ids), 16*n)
	}
	return texts, ids
}

// holder is a peer holding half of the chunks, as alpha's hunt source.
type holder struct {
	name   string
	id     peer.ID
	chunks *countingChunks
	meter  *p2p.Meter
	link   *vault.Link
}

// check checks what the hunt res asked of hd, which holds the chunks
// (mine of them) of ids for which its says yes: hd was a source keyed by
// its peer id, found exactly those, was asked each id at most once (its
// own exactly once), and saw no more ids per request, requests per
// window or requests at once than cfg allows; its meter agrees for
// alpha (aid).
func (hd *holder) check(t *testing.T, res vault.HuntResult, cfg hunt.Config, aid peer.ID, ids []string, its func(string) bool, mine int) {
	t.Helper()
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
	if st.Requests == 0 || st.Chunks != uint64(mine) {
		t.Errorf("%s: %d requests found %d chunks; want its half, %d", hd.name, st.Requests, st.Chunks, mine)
	}
	if st.Failed != 0 {
		t.Errorf("%s: %d requests failed", hd.name, st.Failed)
	}
	hd.chunks.mu.Lock()
	defer hd.chunks.mu.Unlock()
	requests, most, starts := hd.chunks.requests, hd.chunks.max, hd.chunks.starts
	// No window (less a margin for the network's jitter) saw more
	// requests arrive than the hunt may start in one.
	span := cfg.Window - 100*time.Millisecond
	for j, a := range starts {
		n := 0
		for _, b := range starts[j:] {
			if b.Sub(a) < span {
				n++
			}
		}
		if n > cfg.MaxPerWindow {
			t.Errorf("%s got %d requests within %v of %v; the hunt allows %d per %v", hd.name, n, span, a.Format("15:04:05.000"), cfg.MaxPerWindow, cfg.Window)
		}
	}
	for id, n := range hd.chunks.asked {
		if n > 1 {
			t.Errorf("%s was asked %d times for %s", hd.name, n, id)
		}
	}
	for _, id := range ids {
		if its(id) && hd.chunks.asked[id] != 1 {
			t.Errorf("%s was asked %d times for %s, one of its own", hd.name, hd.chunks.asked[id], id)
		}
	}
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
	t.Logf("%s: %d chunks of %d, %d requests, at most %d at once", hd.name, st.Chunks, len(ids), st.Requests, most)
	c := hd.meter.Snapshot()[aid]
	if c.ChunkRequests != st.Requests || c.ChunksOut != uint64(mine) {
		t.Errorf("%s's meter for alpha: %d chunk requests, %d chunks out; want %d and %d", hd.name, c.ChunkRequests, c.ChunksOut, st.Requests, mine)
	}
}

// The same through the group, as the command line runs it: alpha holds
// the notes, beta and gamma half of their chunks each; a one-shot
// SyncVault that pushes (so no chunk arrives by replication) and hunts
// finds both peers through the room and completes the notes from them,
// within the vault's hunt limits, and the holders' group meters count
// exactly their halves served to alpha.
func TestGroupSyncHuntsAcrossPeers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	url := startNostrRelay(t)
	room, err := discovery.NewRoom(groupName, groupPassphrase)
	if err != nil {
		t.Fatal(err)
	}
	s := settings()
	ost := memStore(t, "origin")
	texts, ids := writeLongNotes(t, ctx, openVault(t, ost, s, "origin"), 2)
	half := map[string]int{}
	for i, id := range ids {
		half[id] = i % 2
	}

	alpha := newMember(t, "alpha", memStore(t, "alpha"))
	if err := copyDocs(ctx, ost, alpha.st, docid.IsChunkID); err != nil {
		t.Fatal(err)
	}
	cfg := hunt.Config{MaxInFlight: 2, MaxPerWindow: 8, Window: 500 * time.Millisecond, BatchSize: 4}
	av, err := vault.Open(ctx, alpha.st, vault.Options{Settings: &s, Hunt: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { av.Close() })
	alpha.v = av
	ms := []*member{alpha}
	counts := map[string]*countingChunks{}
	for i, name := range []string{"beta", "gamma"} {
		m := newMember(t, name, memStore(t, name))
		m.v = openVault(t, m.st, s, name)
		if err := copyDocs(ctx, ost, m.st, func(id string) bool { n, ok := half[id]; return ok && n != i }); err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	approveAll(t, ms)
	for _, m := range ms {
		served := p2p.ServedVault(m.v, groupName, s)
		if m != alpha {
			counts[m.name] = &countingChunks{ChunkReader: served.Chunks, asked: map[engine.ChunkID]int{}}
			served.Chunks = counts[m.name]
		}
		m.join(t, room, url, served)
	}

	res, err := p2p.SyncVault(ctx, av, alpha.g, p2p.VaultSyncOptions{Direction: replicate.Push, Hunt: true, Wait: 10 * time.Second, Attach: attachOptions(vaultPassphrase)})
	if err != nil || len(res.Failed) != 0 || len(res.Peers) != 2 {
		t.Fatalf("alpha's sync: %+v, %v; want both peers synced", res, err)
	}
	if len(res.Hunt.Released) != len(texts) || len(res.Hunt.Held) != 0 {
		t.Fatalf("the hunt released %d and left %d held (%+v)", len(res.Hunt.Released), len(res.Hunt.Held), res.Hunt.Held)
	}
	for path, text := range texts {
		if data, err := av.Read(ctx, path); err != nil || string(data) != text {
			t.Fatalf("alpha reads %s: %d bytes, %v", path, len(data), err)
		}
	}
	for i, m := range ms[1:] {
		mine := 0
		for _, id := range ids {
			if half[id] == i {
				mine++
			}
		}
		st := res.Hunt.Stats.Sources[m.id.String()]
		c := m.g.Meter().Snapshot()[alpha.id]
		if st.Chunks != uint64(mine) || c.ChunksOut != uint64(mine) || c.ChunkRequests != st.Requests || st.Requests == 0 {
			t.Errorf("%s: the hunt counted %d requests finding %d chunks, its meter %d requests and %d chunks out; want its half, %d", m.name, st.Requests, st.Chunks, c.ChunkRequests, c.ChunksOut, mine)
		}
		cc := counts[m.name]
		cc.mu.Lock()
		for id, n := range cc.asked {
			if n > 1 {
				t.Errorf("%s was asked %d times for %s", m.name, n, id)
			}
		}
		if cc.max > cfg.MaxInFlight {
			t.Errorf("%s served %d requests at once; the hunt allows %d", m.name, cc.max, cfg.MaxInFlight)
		}
		cc.mu.Unlock()
	}
}
