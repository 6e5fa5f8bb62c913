//go:build !js

package p2ptest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/livesync-go/livesync-go/adapters/p2p"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/docid"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// gate is a served endpoint that counts what a client asks of it and
// stops the first BulkDocs that comes after at documents were received,
// until released: the test closes the client's host while that batch is
// in flight. (A pipelined push sends several pages in one BulkDocs, so
// documents, not calls, say how far it got.)
type gate struct {
	engine.Endpoint
	at       int64
	stopped  atomic.Bool
	diffed   atomic.Int64 // ids asked about in RevsDiff
	written  atomic.Int64 // documents received in BulkDocs
	reached  chan struct{}
	release  chan struct{}
	finished chan struct{} // the stopped BulkDocs returned
}

func newGate(ep engine.Endpoint, at int64) *gate {
	return &gate{Endpoint: ep, at: at, reached: make(chan struct{}), release: make(chan struct{}), finished: make(chan struct{})}
}

func (g *gate) RevsDiff(ctx context.Context, revs map[string][]string) (map[string][]string, error) {
	g.diffed.Add(int64(len(revs)))
	return g.Endpoint.RevsDiff(ctx, revs)
}

func (g *gate) BulkDocs(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	before := g.written.Add(int64(len(docs))) - int64(len(docs))
	if before < g.at || !g.stopped.CompareAndSwap(false, true) {
		return g.Endpoint.BulkDocs(ctx, docs)
	}
	defer close(g.finished)
	close(g.reached)
	<-g.release
	// The client is gone by now; the batch is written all the same,
	// unacknowledged, as a server that finished its work would.
	return g.Endpoint.BulkDocs(context.WithoutCancel(ctx), docs)
}

// docRevs lists the (id, winning revision) of every document of st but
// the system ones.
func docRevs(ctx context.Context, st store.Store) (map[string]string, error) {
	infos, err := st.AllDocs(ctx, store.AllDocsOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, in := range infos {
		if !docid.IsSystemID(in.ID) {
			out[in.ID] = in.Rev
		}
	}
	return out, nil
}

// A peer pushing 2,000 notes to two peers loses its host in the middle of
// a batch; it comes back with the same identity and store, pushes again,
// and both peers end with exactly its documents: the second push resumes
// from the checkpoints (it does not diff again what was acknowledged),
// sends nothing they already hold, and no note gets a second revision.
func TestDisconnectMidBatchResumes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := settings()
	const notes = 2000

	key, id := newKey(t)
	ast := memStore(t, "pusher")
	av := openVault(t, ast, s, "pusher")
	for i := range notes {
		text := fmt.Sprintf("# note %d\nwritten before the push, line %d of the vault\n", i, i)
		if _, err := av.Write(ctx, fmt.Sprintf("notes/%04d.md", i), []byte(text), vault.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	want, err := docRevs(ctx, ast)
	if err != nil {
		t.Fatal(err)
	}
	total := int64(len(want))

	others := gatedPeers(t, s, id, []string{"beta", "gamma"})
	// push attaches v to every other peer through a new host with the
	// pusher's identity and pushes to all at once; onFlight runs once
	// the pushes are in flight.
	push := func(v *vault.Vault, onFlight func(h host.Host)) []error {
		t.Helper()
		h := newHost(t, key)
		errs := make([]error, len(others))
		var wg sync.WaitGroup
		for i, o := range others {
			l, err := v.Attach(ctx, p2p.NewRemote(h, o.info, p2p.RemoteOptions{Group: groupName}), attachOptions(vaultPassphrase))
			if err != nil {
				t.Fatalf("attach %s: %v", o.name, err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = v.Push(ctx, l, vault.SyncOptions{})
			}()
		}
		onFlight(h)
		wg.Wait()
		return errs
	}

	errs := push(av, func(h host.Host) {
		for _, o := range others {
			select {
			case <-o.gate.reached:
			case <-ctx.Done():
				t.Fatalf("the push to %s never sent its 2,000th document", o.name)
			}
		}
		h.Close() // the pusher goes away mid-batch
		for _, o := range others {
			close(o.gate.release)
		}
	})
	have := map[string]int64{}
	for i, o := range others {
		if errs[i] == nil {
			t.Fatalf("the push to %s succeeded although the pusher's host closed mid-batch", o.name)
		}
		<-o.gate.finished
		got, err := docRevs(ctx, o.st)
		if err != nil {
			t.Fatal(err)
		}
		have[o.name] = int64(len(got))
		if have[o.name] == 0 || have[o.name] >= total {
			t.Fatalf("%s holds %d of %d documents after the interrupted push; want some, not all", o.name, have[o.name], total)
		}
	}

	// The pusher comes back: same identity, same store, a new vault.
	if err := av.Close(); err != nil {
		t.Fatal(err)
	}
	av = openVault(t, ast, s, "pusher")
	diffed, written := map[string]int64{}, map[string]int64{}
	for _, o := range others {
		diffed[o.name], written[o.name] = o.gate.diffed.Load(), o.gate.written.Load()
	}
	for i, err := range push(av, func(host.Host) {}) {
		if err != nil {
			t.Fatalf("the push to %s after the pusher came back: %v", others[i].name, err)
		}
	}
	for _, o := range others {
		o.checkResumed(t, ctx, s, want, notes, have[o.name], diffed[o.name], written[o.name])
	}
}

// gatedPeer is a vault peer serving its replica through a gate.
type gatedPeer struct {
	name string
	st   store.Store
	gate *gate
	info peer.AddrInfo
}

// gatedPeers starts the named vault peers, serving the pusher id only.
func gatedPeers(t *testing.T, s livesync.Settings, pusher peer.ID, names []string) []*gatedPeer {
	t.Helper()
	var out []*gatedPeer
	for _, name := range names {
		st := memStore(t, name)
		v := openVault(t, st, s, name)
		served := *p2p.ServedVault(v, groupName, s)
		// 2,000 notes are ~4,000 documents, ~40 batches of 100: past
		// 2,000 documents the push is past its tenth batch, where the
		// replicator checkpoints on the target, and well before the end.
		g := newGate(served.Endpoint, 2000)
		served.Endpoint = g
		allow := p2p.NewAllowList()
		allow.Allow(pusher, "pusher")
		h := newHost(t, nil)
		t.Cleanup(p2p.Serve(h, p2p.ServeConfig{DB: served, Allow: allow}))
		out = append(out, &gatedPeer{name: name, st: st, gate: g, info: addrInfo(h)})
	}
	return out
}

// checkResumed checks that o holds exactly the pusher's documents (want,
// notes notes of one revision each), and that since the counters were
// diffed and written the second push diffed less than everything and
// sent no more than the total less the have documents o held.
func (o *gatedPeer) checkResumed(t *testing.T, ctx context.Context, s livesync.Settings, want map[string]string, notes int, have, diffed, written int64) {
	t.Helper()
	total := int64(len(want))
	got, err := docRevs(ctx, o.st)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Errorf("%s holds %d documents, the pusher %d", o.name, len(got), len(want))
	}
	for id, rev := range want {
		if got[id] != rev {
			t.Errorf("%s: %s is at %q, the pusher's at %q", o.name, id, got[id], rev)
			break
		}
	}
	gens := map[string]int{}
	for i := range notes {
		gens[fmt.Sprintf("notes/%04d.md", i)] = 1
	}
	if err := checkRevisions(ctx, o.st, vault.IDMapper(s).FromPath, gens); err != nil {
		t.Errorf("%s: %v", o.name, err)
	}
	d, w := o.gate.diffed.Load()-diffed, o.gate.written.Load()-written
	if d >= total {
		t.Errorf("%s: the second push diffed %d documents of %d: it started over instead of resuming from a checkpoint", o.name, d, total)
	}
	if w > total-have {
		t.Errorf("%s: the second push sent %d documents, but only %d were missing", o.name, w, total-have)
	}
}
