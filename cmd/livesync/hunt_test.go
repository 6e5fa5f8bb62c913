package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/enginetest"
	"github.com/livesync-go/livesync-go/engine/hold"
	"github.com/livesync-go/livesync-go/engine/hunt"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/store"
)

// failingSource fails every request with a transport error.
type failingSource struct{ key string }

func (f failingSource) FetchChunks(context.Context, []engine.ChunkID) (engine.FetchResult, error) {
	return engine.FetchResult{}, &engine.Error{Op: "fetch chunks", Stage: engine.StageTransport, Err: errors.New("connection refused")}
}
func (f failingSource) CanFetchDirect() bool { return true }
func (f failingSource) ThrottleKey() string  { return f.key }

// hangingSource answers only when its context ends.
type hangingSource struct{}

func (hangingSource) FetchChunks(ctx context.Context, _ []engine.ChunkID) (engine.FetchResult, error) {
	<-ctx.Done()
	return engine.FetchResult{}, ctx.Err()
}
func (hangingSource) CanFetchDirect() bool { return true }
func (hangingSource) ThrottleKey() string  { return "hang:1" }

// Chunks split between two sources arrive from each; an id no source has
// is "on no remote", unless a source failed, which is then the reason.
func TestHuntChunks(t *testing.T) {
	a := enginetest.MapSource{Key: "a:1", Chunks: map[string]string{"h:1": "one", "h:2": "two"}}
	b := enginetest.MapSource{Key: "b:1", Chunks: map[string]string{"h:3": "three"}}
	docs := []huntDoc{{id: "d1", missing: []string{"h:1", "h:3"}, origin: "b:1"}, {id: "d2", missing: []string{"h:2", "h:4"}}}
	for _, tc := range []struct {
		name    string
		sources []engine.ChunkSource
		reasons []string
	}{
		{"two sources", []engine.ChunkSource{a, b}, []string{"1 chunk is on no remote"}},
		{"and a failing one", []engine.ChunkSource{a, b, failingSource{"f:1"}},
			[]string{"1 chunk: f:1 failed: cannot reach the remote: connection refused"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				local := enginetest.NewMemChunks()
				start := time.Now()
				var found []int
				res, err := huntChunks(context.Background(), local, docs, tc.sources, func(n int) { found = append(found, n) }, hunt.Config{})
				if err != nil {
					t.Fatal(err)
				}
				if d := time.Since(start); d != 0 {
					t.Errorf("the hunt took %s of virtual time, want none (no throttle or backoff was hit)", d)
				}
				got, _ := local.GetChunks(context.Background(), []string{"h:1", "h:2", "h:3", "h:4"})
				if len(got) != 3 || got["h:3"].Data != "three" {
					t.Errorf("local after the hunt: %v", got)
				}
				if sum(found) != 3 {
					t.Errorf("deliveries %v, want 3 chunks in all", found)
				}
				if r := res.reasons([]string{"h:4"}, tc.sources); !slices.Equal(r, tc.reasons) {
					t.Errorf("reasons %q, want %q", r, tc.reasons)
				}
				// d1's metadata came from b: b is asked first for it.
				if st := res.stats.Sources["b:1"]; st.Chunks != 1 {
					t.Errorf("b: %+v", st)
				}
			})
		})
	}
}

func sum(ns []int) int {
	s := 0
	for _, n := range ns {
		s += n
	}
	return s
}

// The hunt keeps engine/hunt's per-source throttle: 40 documents on one
// source take 30 requests in the first minute and the other 10 when the
// window frees, exactly 60 s later.
func TestHuntChunksThrottled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := enginetest.MapSource{Key: "couch:5984", Chunks: map[string]string{}}
		var docs []huntDoc
		for i := range 40 {
			id := fmt.Sprintf("h:%02d", i)
			src.Chunks[id] = id
			docs = append(docs, huntDoc{id: fmt.Sprintf("doc%02d", i), missing: []string{id}})
		}
		local := enginetest.NewMemChunks()
		start := time.Now()
		res, err := huntChunks(context.Background(), local, docs, []engine.ChunkSource{src}, nil, hunt.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != time.Minute || local.Len() != 40 || res.stats.Sources["couch:5984"].Requests != 40 {
			t.Errorf("after %s: %d chunks local, %+v", d, local.Len(), res.stats.Sources["couch:5984"])
		}
		// --per-minute 40: no wait.
		local, start = enginetest.NewMemChunks(), time.Now()
		if _, err := huntChunks(context.Background(), local, docs, []engine.ChunkSource{src}, nil, hunt.Config{MaxPerWindow: 40, Window: time.Minute}); err != nil ||
			time.Since(start) != 0 || local.Len() != 40 {
			t.Errorf("40 per minute: after %s, %d chunks local, %v", time.Since(start), local.Len(), err)
		}
	})
}

// Ctrl-C ends a hunt waiting on a source that does not answer.
func TestHuntChunksInterrupted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(5*time.Second, cancel)
		start := time.Now()
		_, err := huntChunks(ctx, enginetest.NewMemChunks(), []huntDoc{{id: "d", missing: []string{"h:1"}}}, []engine.ChunkSource{hangingSource{}}, nil, hunt.Config{})
		if !errors.Is(err, context.Canceled) || time.Since(start) != 5*time.Second {
			t.Errorf("after %s: %v", time.Since(start), err)
		}
	})
}

// dropChunk deletes a chunk from the replica, as if it had never been
// pulled.
func dropChunk(t *testing.T, st store.Store, id string) {
	t.Helper()
	ctx := context.Background()
	raw, err := st.Get(ctx, id, store.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Rev string `json:"_rev"`
	}
	json.Unmarshal(raw, &d)
	b, _ := json.Marshal(map[string]any{"_id": id, "_rev": d.Rev, "_deleted": true})
	if _, err := st.Put(ctx, b); err != nil {
		t.Fatal(err)
	}
}

// hunt lists the held files: path, missing count, since when and from
// where (recorded by the pull that brought them), and when they were last
// hunted; nothing is scheduled.
func TestHuntListing(t *testing.T) {
	s := newSession(t)
	if out := func() string { s.ok("a\n", "put", "a.md"); return s.ok("", "hunt") }(); !strings.Contains(out, "nothing is held") {
		t.Errorf("hunt with nothing held: %q", out)
	}
	s.ok("b\n", "put", "notes/b.md")
	st := s.openStore()
	codec, _ := livesync.New(livesync.Config{Settings: livesync.Settings{CustomChunkSize: 60}})
	meta, chunks, _ := codec.FileDocs("notes/b.md", []byte("b\n"), 0, 0)
	dropChunk(t, st, chunks[0].ID)

	// A pull that brought notes/b.md records when and from where.
	ctx := context.Background()
	tr := &heldTracker{st: st, source: "http://couch.example:5984/vault", now: func() time.Time { return s.now }, seen: map[string]bool{}}
	for _, doc := range []string{meta.ID, "a.md", "gone.md"} {
		tr.Hold(ctx, hold.Revision{Doc: doc}, "")
	}
	if err := tr.commit(ctx); err != nil {
		t.Fatal(err)
	}
	rec, _ := loadHeld(ctx, st)
	if len(rec.Docs) != 1 || rec.Docs[meta.ID] == nil || !rec.Docs[meta.ID].Since.Equal(s.now) {
		t.Fatalf("record: %+v", rec.Docs)
	}
	// A later pull keeps the first date.
	tr.now = func() time.Time { return s.now.Add(time.Hour) }
	tr.Hold(ctx, hold.Revision{Doc: meta.ID}, "")
	tr.commit(ctx)
	st.Close()

	out := s.ok("", "hunt")
	for _, want := range []string{"1 file is held", "notes/b.md", "1 of 1", s.now.Local().Format("2006-01-02 15:04:05"), "http://couch.example:5984/vault", "never", "none scheduled"} {
		if !strings.Contains(out, want) {
			t.Errorf("hunt lacks %q:\n%s", want, out)
		}
	}
	var js struct {
		Held []map[string]any `json:"held"`
	}
	json.Unmarshal([]byte(s.ok("", "hunt", "--json")), &js)
	if len(js.Held) != 1 || js.Held[0]["path"] != "notes/b.md" || js.Held[0]["missing"] != 1.0 || js.Held[0]["since"] != "2024-05-06T07:08:09Z" ||
		js.Held[0]["next_attempt"] != nil || js.Held[0]["last_attempt"] != nil {
		t.Errorf("hunt --json: %+v", js.Held)
	}
	if code, _, errs := s.run("", "hunt", "home"); code != exitUsage || !strings.Contains(errs, "--retry") {
		t.Errorf("hunt REMOTE without --retry: exit %d %q", code, errs)
	}
	if code, _, errs := s.run("", "hunt", "--retry", "--per-minute", "0"); code != exitUsage || !strings.Contains(errs, "--per-minute") {
		t.Errorf("hunt --per-minute 0: exit %d %q", code, errs)
	}
	if code, _, errs := s.run("", "hunt", "--retry"); code != exitUsage || !strings.Contains(errs, "no remote to hunt on") {
		t.Errorf("hunt --retry without remotes: exit %d %q", code, errs)
	}
	if out := s.ok("", "status"); !strings.Contains(out, "1 file wait") || !strings.Contains(out, "livesync hunt") {
		t.Errorf("status:\n%s", out)
	}
}
