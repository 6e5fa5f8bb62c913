package enginetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
)

// ChunkSourceSuite runs the conformance tests of engine.ChunkSource.
//
// newSource returns a source that holds exactly chunks (ids "h:…" the
// suite makes up, plaintext data) and no other id the suite asks for, and
// a cleanup function (nil if none) called when the test ends. broken
// returns a source of the same kind that cannot answer (its server down
// or refusing the credentials, its bucket failing), for which every
// FetchChunks must be an error, never ids reported Missing.
func ChunkSourceSuite(t *testing.T,
	newSource func(t *testing.T, chunks []engine.Chunk) (engine.ChunkSource, func()),
	broken func(t *testing.T) (engine.ChunkSource, func())) {
	tests := []struct {
		name string
		fn   func(t *testing.T, held []engine.Chunk, src engine.ChunkSource)
	}{
		{"FoundAndMissing", testSourceFoundMissing},
		{"HundredIDs", testSourceHundred},
		{"NoIDs", testSourceNoIDs},
		{"Concurrent", testSourceConcurrent},
		{"Capabilities", testSourceCapabilities},
		{"CancelledContext", testSourceCancelled},
	}
	held := sourceChunks(60)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src, cleanup := newSource(t, held)
			if cleanup != nil {
				t.Cleanup(cleanup)
			}
			tc.fn(t, held, src)
		})
	}
	t.Run("ErrorsAreNotOmissions", func(t *testing.T) {
		src, cleanup := broken(t)
		if cleanup != nil {
			t.Cleanup(cleanup)
		}
		ids := []engine.ChunkID{held[0].ID, "h:suite-absent"}
		res, err := src.FetchChunks(t.Context(), ids)
		if err == nil {
			t.Fatalf("a source that cannot answer returned %d found, %v missing and no error", len(res.Found), res.Missing)
		}
		if errors.Is(err, context.Canceled) {
			t.Fatalf("a failing source reported a cancelled context: %v", err)
		}
	})
}

// sourceChunks returns n chunks with distinct ids and data, some of it
// multi-line and non-ASCII.
func sourceChunks(n int) []engine.Chunk {
	out := make([]engine.Chunk, n)
	for i := range out {
		out[i] = engine.Chunk{ID: fmt.Sprintf("h:suite%04d", i), Data: fmt.Sprintf("chunk %d\nline two é 日本 %d\n", i, i*i)}
	}
	return out
}

// checkFetch asks src for ids and checks the answer against held: every
// id exactly once, in Found (with held's data) when held has it, else in
// Missing; nothing else.
func checkFetch(src engine.ChunkSource, ctx context.Context, held []engine.Chunk, ids []engine.ChunkID) error {
	res, err := src.FetchChunks(ctx, ids)
	if err != nil {
		return fmt.Errorf("fetch %d ids: %w", len(ids), err)
	}
	byID := map[engine.ChunkID]string{}
	for _, c := range held {
		byID[c.ID] = c.Data
	}
	seen := map[engine.ChunkID]bool{}
	for _, c := range res.Found {
		want, ok := byID[c.ID]
		switch {
		case seen[c.ID]:
			return fmt.Errorf("%s answered twice", c.ID)
		case !slices.Contains(ids, c.ID):
			return fmt.Errorf("%s found but not asked for", c.ID)
		case !ok:
			return fmt.Errorf("%s found but the source does not hold it", c.ID)
		case c.Data != want:
			return fmt.Errorf("%s: data %q, want %q", c.ID, c.Data, want)
		}
		seen[c.ID] = true
	}
	for _, id := range res.Missing {
		switch _, ok := byID[id]; {
		case seen[id]:
			return fmt.Errorf("%s answered twice", id)
		case !slices.Contains(ids, id):
			return fmt.Errorf("%s missing but not asked for", id)
		case ok:
			return fmt.Errorf("%s reported missing but the source holds it", id)
		}
		seen[id] = true
	}
	if len(seen) != len(ids) {
		return fmt.Errorf("%d of %d ids answered", len(seen), len(ids))
	}
	return nil
}

func testSourceFoundMissing(t *testing.T, held []engine.Chunk, src engine.ChunkSource) {
	ids := []engine.ChunkID{held[3].ID, "h:suite-absent-1", held[0].ID, "h:suite-absent-2", held[59].ID}
	if err := checkFetch(src, t.Context(), held, ids); err != nil {
		t.Fatal(err)
	}
	if err := checkFetch(src, t.Context(), held, []engine.ChunkID{"h:suite-absent-3"}); err != nil {
		t.Fatal(err)
	}
	if err := checkFetch(src, t.Context(), held, []engine.ChunkID{held[1].ID}); err != nil {
		t.Fatal(err)
	}
}

// The caller may send up to 100 ids in one request.
func testSourceHundred(t *testing.T, held []engine.Chunk, src engine.ChunkSource) {
	var ids []engine.ChunkID
	for i := range 100 {
		if i%5 == 4 {
			ids = append(ids, engine.ChunkID(fmt.Sprintf("h:suite-absent-%03d", i)))
		} else {
			ids = append(ids, held[i%len(held)].ID)
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	for len(ids) < 100 {
		ids = append(ids, engine.ChunkID(fmt.Sprintf("h:suite-pad-%03d", len(ids))))
	}
	if err := checkFetch(src, t.Context(), held, ids); err != nil {
		t.Fatal(err)
	}
}

func testSourceNoIDs(t *testing.T, _ []engine.Chunk, src engine.ChunkSource) {
	res, err := src.FetchChunks(t.Context(), nil)
	if err != nil || len(res.Found)+len(res.Missing) != 0 {
		t.Fatalf("no ids: %+v, %v", res, err)
	}
}

func testSourceConcurrent(t *testing.T, held []engine.Chunk, src engine.ChunkSource) {
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids := []engine.ChunkID{held[g].ID, held[g+8].ID, engine.ChunkID(fmt.Sprint("h:suite-absent-g", g))}
			if err := checkFetch(src, t.Context(), held, ids); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A source under test fetches by id, and names a stable throttle key.
func testSourceCapabilities(t *testing.T, _ []engine.Chunk, src engine.ChunkSource) {
	if !src.CanFetchDirect() {
		t.Fatal("CanFetchDirect is false: the suite needs a source that fetches by id")
	}
	if k := src.ThrottleKey(); k == "" || k != src.ThrottleKey() {
		t.Fatalf("ThrottleKey %q: want a stable, non-empty key", k)
	}
}

// A cancelled context returns ctx's error, not an answer with the ids
// Missing.
func testSourceCancelled(t *testing.T, held []engine.Chunk, src engine.ChunkSource) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	res, err := src.FetchChunks(ctx, []engine.ChunkID{held[0].ID, "h:suite-absent"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %+v, %v; want context.Canceled", res, err)
	}
}
