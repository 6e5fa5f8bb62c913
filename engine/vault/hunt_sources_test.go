package vault

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/enginetest"
	"github.com/livesync-go/livesync-go/engine/hunt"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/vault/vaulttest"
)

// sourceRemote is an in-memory remote whose chunk source is src.
type sourceRemote struct {
	*vaulttest.Remote
	src engine.ChunkSource
}

func (s sourceRemote) ID() string                                { return "mem://" + s.src.ThrottleKey() }
func (s sourceRemote) Chunks(*livesync.Codec) engine.ChunkSource { return s.src }

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

// huntRig is a vault holding files whose chunks are on sources.
type huntRig struct {
	t *testing.T
	d *device
}

func newHuntRig(t *testing.T) *huntRig {
	return &huntRig{t: t, d: newDevice(t, Options{Settings: &livesync.Settings{}})}
}

// attach attaches a remote serving src.
func (r *huntRig) attach(src engine.ChunkSource) *Link {
	base := vaulttest.NewRemote("mem://" + src.ThrottleKey())
	r.t.Cleanup(func() { base.Close() })
	return r.d.attach(r.t, sourceRemote{base, src}, AttachOptions{Create: true})
}

// hold writes the metadata of a file of text without its chunks, as if
// pulled from the remote named source; it returns its chunk.
func (r *huntRig) hold(p, text, source string) engine.Chunk {
	chunks := putMetaOnly(r.t, r.d.st, p, text)
	if len(chunks) != 1 {
		r.t.Fatalf("%d chunks", len(chunks))
	}
	if source != "" {
		rec, _ := loadHeld(context.Background(), r.d.st)
		ids := IDMapper(livesync.Settings{})
		rec.Docs[ids.FromPath(p)] = &heldEntry{Source: source}
		if err := rec.save(context.Background(), r.d.st); err != nil {
			r.t.Fatal(err)
		}
	}
	return chunks[0]
}

// Chunks split between two remotes arrive from each, the remote the
// metadata came from asked first; a chunk no remote has is "on no
// remote", unless a remote failed, which is then the reason.
func TestHuntTwoRemotes(t *testing.T) {
	explain := func(err error) string { return "cannot reach the remote: connection refused" }
	for _, tc := range []struct {
		name    string
		failing bool
		reason  string
	}{
		{"two remotes", false, "1 chunk is on no remote"},
		{"and a failing one", true, "1 chunk: f:1 failed: cannot reach the remote: connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newHuntRig(t)
				c1 := r.hold("one.md", "one", "")
				c2 := r.hold("two.md", "two", "mem://b:1")
				r.hold("lost.md", "lost", "")
				r.attach(enginetest.MapSource{Key: "a:1", Chunks: map[string]string{c1.ID: c1.Data, c2.ID: c2.Data}})
				r.attach(enginetest.MapSource{Key: "b:1", Chunks: map[string]string{c2.ID: c2.Data}})
				if tc.failing {
					r.attach(failingSource{"f:1"})
				}
				// Events come from the hunt's request goroutines, possibly
				// several at once.
				var mu sync.Mutex
				var found []int
				r.d.v.Watch(context.Background(), func(e Event) {
					if e.Kind == HuntFound {
						mu.Lock()
						found = append(found, e.Hunt.Found)
						mu.Unlock()
					}
				})
				start := time.Now()
				res, err := r.d.v.Hunt(context.Background(), HuntOptions{Once: true, Explain: explain})
				if err != nil {
					t.Fatal(err)
				}
				if d := time.Since(start); d != 0 {
					t.Errorf("the hunt took %s of virtual time, want none (no throttle or backoff was hit)", d)
				}
				if len(res.Released) != 2 || len(res.Held) != 1 || res.Held[0].Meta.Path != "lost.md" {
					t.Fatalf("released %d, held %+v", len(res.Released), res.Held)
				}
				if got := res.Held[0].LastResult; got != tc.reason {
					t.Errorf("reason %q, want %q", got, tc.reason)
				}
				mu.Lock()
				if len(found) == 0 || slices.Max(found) != 2 {
					t.Errorf("found %v, want 2 chunks in all", found)
				}
				mu.Unlock()
				// two.md's metadata came from b: b is asked first for it.
				if st := res.Stats.Sources["b:1"]; st.Chunks != 1 {
					t.Errorf("b: %+v", st)
				}
			})
		})
	}
}

// The hunt keeps engine/hunt's per-remote throttle: 40 files on one
// remote take 30 requests in the first minute and the other 10 when the
// window frees, exactly 60 s later.
func TestHuntThrottled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, tc := range []struct {
			cfg  *hunt.Config
			took time.Duration
		}{{nil, time.Minute}, {&hunt.Config{MaxPerWindow: 40, Window: time.Minute}, 0}} {
			r := newHuntRig(t)
			src := enginetest.MapSource{Key: "couch:5984", Chunks: map[string]string{}}
			for i := range 40 {
				c := r.hold(fmt.Sprintf("doc%02d.md", i), fmt.Sprintf("text %02d", i), "")
				src.Chunks[c.ID] = c.Data
			}
			r.attach(src)
			start := time.Now()
			res, err := r.d.v.Hunt(context.Background(), HuntOptions{Once: true, Config: tc.cfg})
			if err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d != tc.took || len(res.Released) != 40 || res.Stats.Sources["couch:5984"].Requests != 40 {
				t.Errorf("%+v: after %s: %d released, %+v", tc.cfg, d, len(res.Released), res.Stats.Sources["couch:5984"])
			}
		}
	})
}

// Cancelling ends a hunt waiting on a remote that does not answer.
func TestHuntInterrupted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newHuntRig(t)
		r.hold("d.md", "text", "")
		r.attach(hangingSource{})
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(5*time.Second, cancel)
		start := time.Now()
		_, err := r.d.v.Hunt(ctx, HuntOptions{Once: true})
		if !errors.Is(err, context.Canceled) || time.Since(start) != 5*time.Second {
			t.Errorf("after %s: %v", time.Since(start), err)
		}
	})
}
