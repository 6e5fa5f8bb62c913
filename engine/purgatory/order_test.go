package purgatory

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/hold"
)

// Holds and arrivals race from many goroutines; whatever the
// interleaving, each document's releases are strictly newer each time,
// and the newest revision is the last one released once every chunk is
// local.
func TestReleaseOrderUnderConcurrency(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 7))
				r := newRig(t, Config{})
				const docs, revs = 3, 6
				var all []engine.ChunkID
				type job struct {
					rv  hold.Revision
					src string
				}
				var jobs []job
				for d := range docs {
					for v := 1; v <= revs; v++ {
						var ch []engine.ChunkID
						for c := range 1 + rng.IntN(3) {
							id := fmt.Sprintf("h:%d-%d-%d", d, v, c)
							ch = append(ch, id)
							all = append(all, id)
						}
						jobs = append(jobs, job{r.rev(fmt.Sprintf("d%d.md", d), fmt.Sprintf("%d-%x", v, rng.Uint32()), ch...), couch})
					}
				}
				rng.Shuffle(len(jobs), func(i, j int) { jobs[i], jobs[j] = jobs[j], jobs[i] })
				rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
				var wg sync.WaitGroup
				for w := range 4 {
					wg.Go(func() {
						for i := w; i < len(jobs); i += 4 {
							if _, err := r.p.Hold(t.Context(), jobs[i].rv, jobs[i].src); err != nil {
								t.Error(err)
							}
							time.Sleep(time.Millisecond)
						}
					})
				}
				wg.Go(func() {
					for _, id := range all {
						r.local.add(id)
						r.p.ChunksArrived([]engine.ChunkID{id})
						time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
					}
				})
				wg.Wait()
				waitIdle()
				last := map[string]string{}
				for _, rel := range r.rel.Released() {
					if prev, ok := last[rel.Doc]; ok && CompareRevs(rel.Rev, prev) <= 0 {
						t.Fatalf("%s: released %s after %s", rel.Doc, rel.Rev, prev)
					}
					last[rel.Doc] = rel.Rev
				}
				newest := map[string]string{}
				for _, j := range jobs {
					if CompareRevs(j.rv.Rev, newest[j.rv.Doc]) > 0 {
						newest[j.rv.Doc] = j.rv.Rev
					}
				}
				for doc, rev := range newest {
					if last[doc] != rev {
						t.Errorf("%s: last released %q, newest %q", doc, last[doc], rev)
					}
				}
				if h := r.p.Held(); len(h) != 0 {
					t.Errorf("still held: %+v", h)
				}
			})
		})
	}
}
