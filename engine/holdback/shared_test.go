package holdback

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/lease"
	"github.com/livesync-go/livesync-go/engine/store"
)

// countStore is one relay's view of the shared store: it counts the
// relay's writes, and those of the purgatory state apart.
type countStore struct {
	store.Store
	mu          sync.Mutex
	writes      int
	stateWrites int
}

func (c *countStore) count(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes++
	if id == localState {
		c.stateWrites++
	}
}

func (c *countStore) counts() (writes, stateWrites int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes, c.stateWrites
}

func (c *countStore) PutLocal(ctx context.Context, id string, doc json.RawMessage) error {
	c.count(id)
	return c.Store.PutLocal(ctx, id, doc)
}

func (c *countStore) UpdateLocal(ctx context.Context, id string, fn func(old json.RawMessage) (json.RawMessage, error)) error {
	c.count(id)
	return c.Store.(store.LocalUpdater).UpdateLocal(ctx, id, fn)
}

func (c *countStore) GetLocals(ctx context.Context, ids []string) (map[string]json.RawMessage, error) {
	return store.GetLocals(ctx, c.Store, ids)
}

func (c *countStore) BulkDocs(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	c.count("")
	return c.Store.BulkDocs(ctx, docs)
}

func (c *countStore) PutChunks(ctx context.Context, chunks []engine.Chunk) error {
	c.count("")
	return c.Store.PutChunks(ctx, chunks)
}

// relay is one process serving the shared database.
type relay struct {
	t *testing.T
	w *countStore
	v *Served
}

// twoRelays opens two followers over one shared memory store.
func twoRelays(t *testing.T, cfg Config) (shared store.Store, a, b *relay) {
	t.Helper()
	shared, err := store.NewMemory(store.Options{Name: "vault"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shared.Close() })
	open := func(name string) *relay {
		w := &countStore{Store: shared}
		v := NewServed(bg, w, ServedConfig{Name: name, Holdback: cfg, Shared: true})
		if err := v.Open(ServedHooks{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { v.Close() })
		return &relay{t: t, w: w, v: v}
	}
	return shared, open("a"), open("b")
}

func (r *relay) push(docs ...json.RawMessage) {
	r.t.Helper()
	res, err := r.v.BulkDocs(bg, docs)
	if err != nil {
		r.t.Fatal(err)
	}
	for _, x := range res {
		if x.Error != "" {
			r.t.Fatalf("push: %+v", x)
		}
	}
}

func (r *relay) refresh() {
	r.t.Helper()
	if err := r.v.Refresh(bg); err != nil {
		r.t.Fatal(err)
	}
}

func (r *relay) held() int { return r.v.Stats().Held }

// leaves returns the revisions of doc's leaves in st and how often doc
// is in the changes feed.
func leaves(t *testing.T, st store.Store, doc string) (revs []string, inFeed int) {
	t.Helper()
	got, err := st.GetRevs(bg, doc, store.RevsOptions{All: true})
	if err != nil && !errors.Is(err, engine.ErrNotFound) {
		t.Fatal(err)
	}
	for _, g := range got {
		revs = append(revs, g.Rev)
	}
	p, err := st.Changes(bg, engine.ChangesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range p.Results {
		if c.ID == doc {
			inFeed++
		}
	}
	return revs, inFeed
}

// A note held by A is invisible on B; B adopts it on Refresh and
// releases it when its chunks are written through B; A forgets it on
// its next Refresh without writing anything.
func TestSharedReleaseThroughOtherRelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		shared, a, b := twoRelays(t, Config{})
		a.push(meta("a.md", "1-a", "h:1"))
		if _, err := b.v.Get(bg, "a.md", store.GetOptions{}); !errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("a held note is served by the other relay: %v", err)
		}
		if a.held() != 1 || b.held() != 0 {
			t.Fatalf("held: a %d, b %d", a.held(), b.held())
		}
		b.refresh()
		if b.held() != 1 {
			t.Fatalf("b did not adopt the held note: %d", b.held())
		}
		b.push(chunk("h:1"))
		synctest.Wait()
		if revs, n := leaves(t, shared, "a.md"); !slices.Equal(revs, []string{"1-a"}) || n != 1 {
			t.Fatalf("after the chunk through b: leaves %v, %d in the feed", revs, n)
		}
		if b.held() != 0 || b.v.Stats().Released != 1 {
			t.Fatalf("b: %+v", b.v.Stats())
		}
		w0, _ := a.w.counts()
		a.refresh()
		if w, _ := a.w.counts(); w != w0 {
			t.Fatalf("a wrote %d times to forget a note released elsewhere", w-w0)
		}
		if st := a.v.Stats(); st.Held != 0 || st.Purgatory.Active != 0 || st.Dropped != 0 {
			t.Fatalf("a after refresh: %+v", st)
		}
		// Nothing changed since: a Refresh reads the index only.
		if err := a.v.Refresh(bg); err != nil {
			t.Fatal(err)
		}
	})
}

// A relay that holds a note releases it when ChunksArrived names chunks
// another relay wrote, before the other adopted the note.
func TestSharedChunksArrivedFromOtherRelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		shared, a, b := twoRelays(t, Config{})
		a.push(meta("a.md", "1-a", "h:1", "h:2"))
		b.push(chunk("h:1"), chunk("h:2")) // b does not know the note
		synctest.Wait()
		if revs, _ := leaves(t, shared, "a.md"); len(revs) != 0 {
			t.Fatalf("released before a was told: %v", revs)
		}
		a.v.ChunksArrived([]engine.ChunkID{"h:1", "h:2"})
		synctest.Wait()
		if revs, n := leaves(t, shared, "a.md"); !slices.Equal(revs, []string{"1-a"}) || n != 1 {
			t.Fatalf("leaves %v, %d in the feed", revs, n)
		}
		b.refresh()
		if a.held() != 0 || b.held() != 0 {
			t.Fatalf("held: a %d, b %d", a.held(), b.held())
		}
	})
}

// Two relays releasing the same note write one revision and report no
// error: at once, and when the first stopped after writing it, before
// taking it out of the area (the second then writes it again).
func TestSharedDoubleRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		shared, a, b := twoRelays(t, Config{})
		a.push(meta("a.md", "1-a", "h:1"))
		b.refresh()
		keep, err := shared.GetLocal(bg, localDocPrefix+"a.md")
		if err != nil {
			t.Fatal(err)
		}
		if err := shared.PutChunks(bg, []engine.Chunk{{ID: "h:1", Data: "piece"}}); err != nil {
			t.Fatal(err)
		}
		a.v.ChunksArrived([]engine.ChunkID{"h:1"})
		synctest.Wait()
		if a.v.Stats().Released != 1 {
			t.Fatalf("a: %+v", a.v.Stats())
		}
		// As if a had died between writing the revision and emptying the
		// holding document.
		if err := shared.PutLocal(bg, localDocPrefix+"a.md", keep); err != nil {
			t.Fatal(err)
		}
		b.v.ChunksArrived([]engine.ChunkID{"h:1"})
		synctest.Wait()
		for _, r := range []*relay{a, b} {
			st := r.v.Stats()
			if st.Released != 1 || st.Dropped != 0 || st.Purgatory.ReleaseErrors != 0 || st.Purgatory.VerifyFailures != 0 || st.SaveErrors != 0 {
				t.Fatalf("%s: %+v", r.v.cfg.Name, st)
			}
		}
		if revs, n := leaves(t, shared, "a.md"); !slices.Equal(revs, []string{"1-a"}) || n != 1 {
			t.Fatalf("leaves %v, %d in the feed", revs, n)
		}
		if h, _ := a.v.cur.Load().area.get(bg, "a.md"); len(h.Revs) != 0 {
			t.Fatalf("the holding area still has %v", h.Revs)
		}

		// Both at once.
		a.push(meta("b.md", "1-b", "h:2"))
		b.refresh()
		if err := shared.PutChunks(bg, []engine.Chunk{{ID: "h:2", Data: "piece"}}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for _, r := range []*relay{a, b} {
			wg.Go(func() { r.v.ChunksArrived([]engine.ChunkID{"h:2"}) })
		}
		wg.Wait()
		synctest.Wait()
		a.refresh()
		b.refresh()
		for _, r := range []*relay{a, b} {
			st := r.v.Stats()
			if st.Held != 0 || st.Purgatory.ReleaseErrors != 0 || st.Purgatory.VerifyFailures != 0 || st.SaveErrors != 0 {
				t.Fatalf("%s: %+v", r.v.cfg.Name, st)
			}
		}
		if revs, n := leaves(t, shared, "b.md"); !slices.Equal(revs, []string{"1-b"}) || n != 1 {
			t.Fatalf("leaves %v, %d in the feed", revs, n)
		}
	})
}

// A follower never writes the purgatory state, through holds, saves,
// releases, expiries and Close; the leader does.
func TestSharedFollowerNeverWritesState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, a, b := twoRelays(t, Config{SaveInterval: time.Minute})
		if err := b.v.SetHunter(bg, &fakeHunter{start: time.Now()}, true); err != nil {
			t.Fatal(err)
		}
		a.push(meta("a.md", "1-a", "h:1"), meta("b.md", "1-b", "h:2"))
		a.refresh()
		b.refresh()
		time.Sleep(3 * time.Minute)
		a.push(chunk("h:1"))
		time.Sleep(3 * time.Minute)
		b.refresh()
		a.refresh()
		time.Sleep(30*time.Minute + 24*time.Hour) // b.md expires
		synctest.Wait()
		if a.held() != 0 || b.held() != 0 {
			t.Fatalf("held: a %d, b %d", a.held(), b.held())
		}
		if err := a.v.Close(); err != nil {
			t.Fatal(err)
		}
		if _, n := a.w.counts(); n != 0 {
			t.Fatalf("the follower wrote the purgatory state %d times", n)
		}
		if _, n := b.w.counts(); n == 0 {
			t.Fatal("the leader never wrote the purgatory state")
		}
	})
}

// SetHunter hands every held note to the new leader's hunter; the old
// leader stops writing the purgatory state; the new one's timers are the
// old one's (absolute times), so a note expires at the same instant.
func TestSharedHandover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		_, a, b := twoRelays(t, Config{SaveInterval: time.Minute})
		ha := &fakeHunter{start: t0}
		if err := a.v.SetHunter(bg, ha, true); err != nil {
			t.Fatal(err)
		}
		a.push(meta("x.md", "1-x", "h:1")) // held by the leader
		b.push(meta("y.md", "1-y", "h:2")) // held by a follower
		a.refresh()
		if got := enqueued(ha); !slices.Equal(got, []string{"x.md", "y.md"}) {
			t.Fatalf("the leader's hunter got %q, want both notes", got)
		}
		time.Sleep(2 * time.Minute) // the leader saved its state at t0+1m
		synctest.Wait()

		// a loses the lease to b.
		if err := a.v.SetHunter(bg, nil, false); err != nil {
			t.Fatal(err)
		}
		_, aState := a.w.counts()
		hb := &fakeHunter{start: t0}
		if err := b.v.SetHunter(bg, hb, true); err != nil {
			t.Fatal(err)
		}
		if docs := enqueued(hb); !slices.Equal(docs, []string{"x.md", "y.md"}) {
			t.Fatalf("the new leader's hunter got %q", hb.Calls())
		}
		if a.v.Leader() || !b.v.Leader() {
			t.Fatal("leadership not moved")
		}
		deadline := func(r *relay, doc string) (time.Time, time.Time) {
			for _, h := range r.v.cur.Load().Held() {
				if h.Doc == doc {
					return h.Since, h.Deadline
				}
			}
			t.Fatalf("%s does not hold %s", r.v.cfg.Name, doc)
			return time.Time{}, time.Time{}
		}
		if since, dl := deadline(b, "x.md"); !since.Equal(t0) || !dl.Equal(t0.Add(30*time.Minute)) {
			t.Fatalf("x.md on the new leader: since %v, deadline %v; want t0, t0+30m", since.Sub(t0), dl.Sub(t0))
		}

		// x.md expires on the new leader at t0+30m+24h exactly.
		time.Sleep(t0.Add(30*time.Minute + 24*time.Hour - time.Nanosecond).Sub(time.Now()))
		synctest.Wait()
		if st := b.v.Stats(); st.Purgatory.Expiries != 0 {
			t.Fatalf("expired early: %+v", st.Purgatory)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if st := b.v.Stats(); st.Purgatory.Expiries == 0 {
			t.Fatalf("not expired at t0+30m+24h: %+v", st.Purgatory)
		}
		if _, n := a.w.counts(); n != aState {
			t.Fatalf("the old leader wrote the purgatory state %d times after losing the lease", n-aState)
		}
	})
}

// enqueued lists the documents of h's Enqueue calls, sorted.
func enqueued(h *fakeHunter) []string {
	var docs []string
	for _, c := range h.Calls() {
		if f := strings.Fields(c); len(f) > 2 && f[1] == "enqueue" {
			docs = append(docs, f[2])
		}
	}
	slices.Sort(docs)
	return docs
}

// A follower picks up the leader's purgatory state when it changes: its
// timers become the leader's.
func TestSharedFollowerPicksUpState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		_, a, b := twoRelays(t, Config{SaveInterval: time.Minute})
		if err := a.v.SetHunter(bg, &fakeHunter{start: t0}, true); err != nil {
			t.Fatal(err)
		}
		a.push(meta("x.md", "1-x", "h:1"))
		time.Sleep(5 * time.Minute)
		synctest.Wait() // a saved at t0+1m
		b.refresh()     // adopts x.md from the state: held since t0
		hs := b.v.cur.Load().Held()
		if len(hs) != 1 || !hs[0].Since.Equal(t0) || !hs[0].Deadline.Equal(t0.Add(30*time.Minute)) {
			t.Fatalf("b holds %+v", hs)
		}
		w0, _ := b.w.counts()
		b.refresh() // nothing changed: nothing rebuilt, nothing written
		if w, _ := b.w.counts(); w != w0 {
			t.Fatalf("an idle refresh wrote %d times", w-w0)
		}
	})
}

// Client writes cannot reach the lease documents.
func TestLeaseIDsReserved(t *testing.T) {
	_, a, _ := twoRelays(t, Config{})
	if err := a.v.PutLocal(bg, lease.DefaultID, json.RawMessage(`{"holder":"me","until":99999999999999}`)); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("a client wrote the lease: %v", err)
	}
	if _, err := a.v.GetLocal(bg, lease.DefaultID); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("a client read the lease: %v", err)
	}
}

// A shared Served needs a store.LocalUpdater.
func TestSharedNeedsLocalUpdater(t *testing.T) {
	inner, err := store.NewMemory(store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Close()
	v := NewServed(bg, struct{ store.Store }{inner}, ServedConfig{Shared: true})
	if err := v.Open(ServedHooks{}); err == nil {
		v.Close()
		t.Fatal("opened over a store that is not a LocalUpdater")
	}
}

// hookStore runs after, once, after the first GetChunks it answers.
type hookStore struct {
	*countStore
	mu    sync.Mutex
	after func()
}

func (h *hookStore) GetChunks(ctx context.Context, ids []engine.ChunkID) (map[engine.ChunkID]engine.Chunk, error) {
	got, err := h.countStore.GetChunks(ctx, ids)
	h.mu.Lock()
	f := h.after
	h.after = nil
	h.mu.Unlock()
	if f != nil {
		f()
	}
	return got, err
}

// Chunks that arrive while the hold-back is rebuilt, after the new one
// read the store, release the notes they complete: the arrivals are kept
// for it.
func TestSharedArrivalDuringRebuild(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		shared, err := store.NewMemory(store.Options{Name: "vault"})
		if err != nil {
			t.Fatal(err)
		}
		defer shared.Close()
		w := &hookStore{countStore: &countStore{Store: shared}}
		v := NewServed(bg, w, ServedConfig{Name: "a", Shared: true})
		if err := v.Open(ServedHooks{}); err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		if err := v.SetHunter(bg, &fakeHunter{start: time.Now()}, true); err != nil {
			t.Fatal(err)
		}
		if _, err := v.BulkDocs(bg, []json.RawMessage{meta("x.md", "1-x", "h:1")}); err != nil {
			t.Fatal(err)
		}
		w.mu.Lock()
		w.after = func() {
			if err := shared.PutChunks(bg, []engine.Chunk{{ID: "h:1", Data: "piece"}}); err != nil {
				t.Error(err)
			}
			v.ChunksArrived([]engine.ChunkID{"h:1"})
		}
		w.mu.Unlock()
		if err := v.SetHunter(bg, &fakeHunter{start: time.Now()}, true); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if revs, _ := leaves(t, shared, "x.md"); !slices.Equal(revs, []string{"1-x"}) {
			t.Fatalf("not released: leaves %v, held %+v", revs, v.cur.Load().Held())
		}
	})
}

// BenchmarkSharedRefresh measures a Refresh of a relay that holds n
// notes (adopted already): idle (the index unchanged) and after another
// relay changed the area (one more note held there, then released).
func BenchmarkSharedRefresh(b *testing.B) {
	for _, n := range []int{0, 100, 1000} {
		shared, err := store.NewMemory(store.Options{Name: "vault"})
		if err != nil {
			b.Fatal(err)
		}
		open := func(name string) *Served {
			v := NewServed(bg, shared, ServedConfig{Name: name, Shared: true})
			if err := v.Open(ServedHooks{}); err != nil {
				b.Fatal(err)
			}
			return v
		}
		a, o := open("a"), open("other")
		for i := range n {
			id := "n" + strconv.Itoa(i) + ".md"
			if _, err := o.BulkDocs(bg, []json.RawMessage{meta(id, "1-a", "h:"+id)}); err != nil {
				b.Fatal(err)
			}
		}
		if err := a.Refresh(bg); err != nil || a.Stats().Held != n {
			b.Fatalf("adopted %d of %d (%v)", a.Stats().Held, n, err)
		}
		b.Run("idle/held="+strconv.Itoa(n), func(b *testing.B) {
			for b.Loop() {
				if err := a.Refresh(bg); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("changed/held="+strconv.Itoa(n), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				o.cur.Load().area.changeIndex(bg, func(map[string]struct{}) bool { return true })
				b.StartTimer()
				if err := a.Refresh(bg); err != nil {
					b.Fatal(err)
				}
			}
		})
		a.Close()
		o.Close()
		shared.Close()
	}
}
