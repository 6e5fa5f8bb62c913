package holdback

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
)

// keepOpen is a Backend whose Close leaves the shared one open: each
// process opens its own Store over one storage.
type keepOpen struct{ store.Backend }

func (keepOpen) Close() error { return nil }

// shared is one storage that several processes open.
type shared struct {
	t  *testing.T
	be store.Backend
}

func newShared(t *testing.T) *shared {
	be := store.NewMemoryBackend()
	t.Cleanup(func() { be.Close() })
	return &shared{t: t, be: be}
}

// open is a new process's inner store over the storage; wrap, if set,
// hides what the store offers beyond store.Store.
func (sh *shared) open(wrap bool) store.Store {
	st, err := store.Open(keepOpen{sh.be}, store.Options{Name: "relay"})
	if err != nil {
		sh.t.Fatal(err)
	}
	if wrap {
		return plainStore{st}
	}
	return st
}

// process is a hold-back opened over the storage, as one process (a
// Worker's request) opens it.
func (sh *shared) process() *rig {
	return newRig(sh.t, Config{}, Deps{Inner: sh.open(false)})
}

// plainStore is a Store with no optional interface: the holding area is
// this hold-back's alone.
type plainStore struct{ store.Store }

// index returns the documents the holding index in st lists.
func index(t *testing.T, st store.Store) []string {
	t.Helper()
	b, err := st.GetLocal(bg, localIndex)
	if errors.Is(err, engine.ErrNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	ix, err := decodeIndex(b)
	if err != nil {
		t.Fatal(err)
	}
	return ix.Docs
}

func heldDocs(s *Store) []string {
	var out []string
	for _, h := range s.Held() {
		out = append(out, h.Doc)
	}
	slices.Sort(out)
	return out
}

// Two processes over one store, each holding a note the other never saw,
// then closing: a third holds both, and releases both once their chunks
// come; the holding area is empty once it closes.
func TestAreaTwoProcesses(t *testing.T) {
	sh := newShared(t)
	one, two := sh.process(), sh.process()
	one.push(meta("a.md", "1-a", "h:a"))
	two.push(meta("b.md", "1-b", "h:b"), meta("c.md", "1-c", "h:c1"))
	one.push(meta("c.md", "2-c", "h:c2")) // a newer revision of a note the other holds
	// The last to close saves the purgatory state: it never knew b.md.
	for _, r := range []*rig{two, one} {
		if err := r.s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	three := sh.process()
	if got := heldDocs(three.s); !reflect.DeepEqual(got, []string{"a.md", "b.md", "c.md"}) {
		t.Fatalf("the third process holds %v, want a.md, b.md and c.md", got)
	}
	if _, revs, _ := three.heldDoc("c.md"); !reflect.DeepEqual(revs, []string{"2-c", "1-c"}) {
		t.Fatalf("c.md holds %v, want both revisions", revs)
	}
	for _, id := range []string{"a.md", "b.md", "c.md"} {
		if three.rev(id) != "" {
			t.Fatalf("%s is served before its chunks", id)
		}
	}
	three.push(chunk("h:a"), chunk("h:b"), chunk("h:c1"), chunk("h:c2"))
	if err := three.s.Settle(bg); err != nil {
		t.Fatal(err)
	}
	for id, rev := range map[string]string{"a.md": "1-a", "b.md": "1-b", "c.md": "2-c"} {
		if got := three.rev(id); got != rev {
			t.Errorf("%s is served at %q, want %s", id, got, rev)
		}
	}
	// Released notes leave the area by the latest when the process
	// closes (a Worker's request ends).
	if err := three.s.Close(); err != nil {
		t.Fatal(err)
	}
	raw := sh.open(false)
	defer raw.Close()
	if ix := index(t, raw); len(ix) != 0 {
		t.Errorf("the index still lists %v", ix)
	}
	for _, id := range []string{"a.md", "b.md", "c.md"} {
		if b, err := raw.GetLocal(bg, localDocPrefix+id); !errors.Is(err, engine.ErrNotFound) {
			t.Errorf("the holding document of %s is left: %s, %v", id, b, err)
		}
	}
}

// Two processes hold and release notes at once, over one store: a note
// released by one leaves the index while the other adds its own, and
// none of the notes still held is lost from it.
func TestAreaTwoProcessesAtOnce(t *testing.T) {
	sh := newShared(t)
	procs := []*rig{sh.process(), sh.process()}
	const perWorker = 24
	want := map[string]bool{} // note → still held
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 4 {
		r := procs[w%2]
		wg.Go(func() {
			for i := range perWorker {
				id, c := fmt.Sprintf("n%d-%02d.md", w, i), fmt.Sprintf("h:%d-%d", w, i)
				if _, err := r.s.BulkDocs(bg, []json.RawMessage{meta(id, "1-x", c)}); err != nil {
					t.Error(err)
					return
				}
				released := i%3 == 0
				if released {
					if _, err := r.s.BulkDocs(bg, []json.RawMessage{chunk(c)}); err != nil {
						t.Error(err)
						return
					}
					if err := r.s.Settle(bg); err != nil {
						t.Error(err)
						return
					}
				}
				mu.Lock()
				want[id] = !released
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, r := range procs {
		if err := r.s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	var held []string
	for id, h := range want {
		if h {
			held = append(held, id)
		}
	}
	slices.Sort(held)
	raw := sh.open(false)
	defer raw.Close()
	if got := index(t, raw); !reflect.DeepEqual(got, held) {
		t.Fatalf("the index lists %d notes, want the %d still held:\n%v\nwant %v", len(got), len(held), got, held)
	}
	three := sh.process()
	if got := heldDocs(three.s); !reflect.DeepEqual(got, held) {
		t.Fatalf("a new process holds %v, want %v", got, held)
	}
	for id, h := range want {
		if served := three.rev(id) != ""; served == h {
			t.Errorf("%s: served %v", id, served)
		}
	}
}

// A note whose last revision left but stayed indexed (its remover
// stopped between its two writes) leaves the index when a process
// resumes; one a hold wrote meanwhile stays.
func TestAreaResumeDropsEmptyEntries(t *testing.T) {
	sh := newShared(t)
	raw := sh.open(false)
	defer raw.Close()
	if err := raw.PutLocal(bg, localIndex, json.RawMessage(`{"docs":["gone.md","kept.md"]}`)); err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(holdingDoc{Revs: map[string]heldBody{"1-k": {Body: meta("kept.md", "1-k", "h:k")}}})
	if err := raw.PutLocal(bg, localDocPrefix+"kept.md", body); err != nil {
		t.Fatal(err)
	}
	r := sh.process()
	if got := heldDocs(r.s); !reflect.DeepEqual(got, []string{"kept.md"}) {
		t.Fatalf("held %v", got)
	}
	if got := index(t, raw); !reflect.DeepEqual(got, []string{"kept.md"}) {
		t.Fatalf("the index lists %v after a resume, want kept.md", got)
	}
}

// A store with no store.LocalUpdater is the hold-back's alone: the index
// is written from memory, and the area survives a restart as before.
func TestAreaWithoutLocalUpdater(t *testing.T) {
	sh := newShared(t)
	r := newRig(t, Config{}, Deps{Inner: sh.open(true)})
	if r.s.area.upd != nil {
		t.Fatal("the area uses UpdateLocal of a store that does not offer it")
	}
	r.push(meta("a.md", "1-a", "h:a"), meta("b.md", "1-b", "h:b"))
	r.push(chunk("h:a"))
	if err := r.s.Settle(bg); err != nil {
		t.Fatal(err)
	}
	if err := r.s.Close(); err != nil {
		t.Fatal(err)
	}
	raw := sh.open(false)
	defer raw.Close()
	if got := index(t, raw); !reflect.DeepEqual(got, []string{"b.md"}) {
		t.Fatalf("index %v, want b.md", got)
	}
	r = newRig(t, Config{}, Deps{Inner: sh.open(true)})
	if got := heldDocs(r.s); !reflect.DeepEqual(got, []string{"b.md"}) {
		t.Fatalf("held after a restart: %v", got)
	}
	r.push(chunk("h:b"))
	if err := r.s.Settle(bg); err != nil {
		t.Fatal(err)
	}
	if r.rev("a.md") != "1-a" || r.rev("b.md") != "1-b" {
		t.Fatalf("served a.md %q, b.md %q", r.rev("a.md"), r.rev("b.md"))
	}
}

// The interleaving the index's protocol is for: one process removes the
// last revision of a note and, before it takes the note out of the
// index, another holds a new revision of it (the note being indexed
// already, its index write changes nothing). The remover's second read
// puts the note back.
func TestAreaUnindexRechecks(t *testing.T) {
	sh := newShared(t)
	var procs [2]area
	for i := range procs {
		procs[i].inner, procs[i].upd = areaStore(sh.open(false))
	}
	one, two := &procs[0], &procs[1]
	body := func(rev string) map[string]heldBody {
		return map[string]heldBody{rev: {Body: meta("n.md", rev, "h:"+rev)}}
	}
	if err := one.add(bg, "n.md", "", body("1-x")); err != nil {
		t.Fatal(err)
	}
	if err := one.indexAdd(bg, []string{"n.md"}); err != nil {
		t.Fatal(err)
	}
	emptied, err := one.update(bg, "n.md", func(h *holdingDoc) bool { delete(h.Revs, "1-x"); return true })
	if err != nil || !emptied {
		t.Fatalf("removing the last revision: emptied %v, %v", emptied, err)
	}
	if err := two.add(bg, "n.md", "", body("2-y")); err != nil {
		t.Fatal(err)
	}
	if err := two.indexAdd(bg, []string{"n.md"}); err != nil {
		t.Fatal(err)
	}
	if err := one.unindex(bg, []string{"n.md"}); err != nil {
		t.Fatal(err)
	}
	if got := index(t, two.inner); !reflect.DeepEqual(got, []string{"n.md"}) {
		t.Fatalf("the index lists %v: the revision held meanwhile is lost", got)
	}
}

// Two processes at once on the same notes: one holds and releases the
// first revision of each, the other holds a second revision (whose chunk
// never comes). Every note stays held at its second revision.
func TestAreaTwoProcessesSameNotes(t *testing.T) {
	sh := newShared(t)
	one, two := sh.process(), sh.process()
	const notes = 40
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range notes {
			id, c := fmt.Sprintf("n%02d.md", i), fmt.Sprintf("h:%d-1", i)
			if _, err := one.s.BulkDocs(bg, []json.RawMessage{meta(id, "1-x", c)}); err != nil {
				t.Error(err)
				return
			}
			if _, err := one.s.BulkDocs(bg, []json.RawMessage{chunk(c)}); err != nil {
				t.Error(err)
				return
			}
			if err := one.s.Settle(bg); err != nil {
				t.Error(err)
				return
			}
		}
	})
	wg.Go(func() {
		for i := range notes {
			id := fmt.Sprintf("n%02d.md", i)
			if _, err := two.s.BulkDocs(bg, []json.RawMessage{metaHist(id, "2-y", []string{"x"}, fmt.Sprintf("h:%d-2", i))}); err != nil {
				t.Error(err)
				return
			}
		}
	})
	wg.Wait()
	for _, r := range []*rig{one, two} {
		if err := r.s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	three := sh.process()
	held := three.s.Held()
	if len(held) != notes {
		t.Fatalf("a new process holds %d notes, want %d: %v", len(held), notes, heldDocs(three.s))
	}
	for _, h := range held {
		if !slices.Contains(h.Revisions, "2-y") {
			t.Errorf("%s holds %v, want 2-y", h.Doc, h.Revisions)
		}
	}
}
