package holdback

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/livesync-go/livesync-go/engine"
)

// Concurrent pushes of metadata and chunks in every order, with a reader
// following the feed: the reader never sees a note whose chunks are not
// all stored, and every note is served in the end.
func TestConcurrentPushesNeverServeIncomplete(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{}, Deps{})
		const notes = 40
		rng := rand.New(rand.NewPCG(1, 2))
		var metas []json.RawMessage
		var chunks []string
		for i := range notes {
			own := []string{fmt.Sprintf("h:%d-a", i), fmt.Sprintf("h:%d-b", i), fmt.Sprintf("h:%d-c", i)}
			metas = append(metas, meta(fmt.Sprintf("n%02d.md", i), fmt.Sprintf("1-%02d", i), append(own, "h:shared")...))
			chunks = append(chunks, own...)
		}
		chunks = append(chunks, "h:shared")

		ctx, cancel := context.WithCancel(bg)
		var readErr error
		readerDone := make(chan struct{})
		go func() { // the reader: every metadata it can see is complete
			defer close(readerDone)
			since := ""
			for {
				p, err := r.s.Changes(ctx, engine.ChangesRequest{Since: since, Wait: true})
				if err != nil {
					if !errors.Is(err, context.Canceled) {
						readErr = err
					}
					return
				}
				since = p.LastSeq
				for _, c := range p.Results {
					if c.ID[:2] == "h:" {
						continue
					}
					docs, err := r.s.BulkGet(ctx, []engine.DocRev{{ID: c.ID, Rev: c.Revs[0]}})
					if err != nil || len(docs) != 1 {
						readErr = fmt.Errorf("BulkGet %s: %v", c.ID, err)
						return
					}
					var m struct{ Children []string }
					json.Unmarshal(docs[0], &m)
					got, err := r.s.GetChunks(ctx, m.Children)
					if err != nil || len(got) != 4 {
						readErr = fmt.Errorf("%s served with %d of 4 chunks stored (%v)", c.ID, len(got), err)
						return
					}
				}
			}
		}()

		var wg sync.WaitGroup
		push := func(docs []json.RawMessage) {
			if _, err := r.s.BulkDocs(bg, docs); err != nil {
				t.Error(err)
			}
		}
		wg.Go(func() { // metadata in small batches
			for i := 0; i < len(metas); {
				n := 1 + rng.IntN(5)
				push(metas[i:min(i+n, len(metas))])
				i += n
			}
		})
		for w := range 3 { // chunks, overlapping, in every order, by BulkDocs and PutChunks
			order := rand.New(rand.NewPCG(uint64(w), 7)).Perm(len(chunks))
			wg.Go(func() {
				for i := 0; i < len(order); i += 4 {
					var docs []json.RawMessage
					var cs []engine.Chunk
					for _, k := range order[i:min(i+4, len(order))] {
						docs = append(docs, chunk(chunks[k]))
						cs = append(cs, engine.Chunk{ID: chunks[k], Data: "piece " + chunks[k]})
					}
					if w == 0 {
						if err := r.s.PutChunks(bg, cs); err != nil {
							t.Error(err)
						}
					} else {
						push(docs)
					}
				}
			})
		}
		wg.Wait()
		synctest.Wait()
		cancel()
		<-readerDone
		if readErr != nil {
			t.Fatal(readErr)
		}
		for i := range notes {
			if got := r.rev(fmt.Sprintf("n%02d.md", i)); got != fmt.Sprintf("1-%02d", i) {
				t.Fatalf("n%02d.md: rev %q", i, got)
			}
		}
		st := r.s.Stats()
		if len(r.s.Held()) != 0 || st.Held != 0 || st.Released+st.WrittenThrough != notes {
			t.Fatalf("held %+v, stats %+v", r.s.Held(), st)
		}
	})
}

// "no lost holds between 'check chunks' and 'hold'": a chunk pushed at
// the same moment as its metadata always ends with the note served.
func TestChunkRacingItsMetadata(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{}, Deps{})
		for i := range 200 {
			id, c := fmt.Sprintf("n%03d.md", i), fmt.Sprintf("h:%03d", i)
			var wg sync.WaitGroup
			gate := make(chan struct{})
			wg.Go(func() {
				<-gate
				if _, err := r.s.BulkDocs(bg, []json.RawMessage{meta(id, "1-a", c)}); err != nil {
					t.Error(err)
				}
			})
			wg.Go(func() {
				<-gate
				if _, err := r.s.BulkDocs(bg, []json.RawMessage{chunk(c)}); err != nil {
					t.Error(err)
				}
			})
			close(gate)
			wg.Wait()
			synctest.Wait()
			if r.rev(id) != "1-a" {
				t.Fatalf("%s lost: held %+v", id, r.s.Held())
			}
		}
	})
}
