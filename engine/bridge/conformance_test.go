package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/decorate"
	"github.com/livesync-go/livesync-go/engine/enginetest"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/store"
)

// The hunt's sources of a bridged database hold to the chunk source
// contract: one CouchDB upstream, and the per-throttle-key source the
// bridge builds over several upstreams (Metered over Multi). Their Found
// chunks are RawChunk envelopes; plainEnvelopes opens them so that the
// suite can compare the chunks' data.

// storeCouch is a CouchDB upstream kept in a memory store.
type storeCouch struct{ store.Store }

func (storeCouch) Exists(context.Context) (bool, error) { return true, nil }

func (c storeCouch) DocsByID(ctx context.Context, ids []string) (map[string]json.RawMessage, error) {
	return rawDocs{c.Store}.DocsByID(ctx, ids)
}

// couchUpstream is a connected CouchDB upstream holding chunks as plain
// chunk documents.
func couchUpstream(t *testing.T, b *Bridge, name string, chunks []engine.Chunk) *upstream {
	t.Helper()
	st, err := store.NewMemory(store.Options{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	docs := make([]json.RawMessage, len(chunks))
	for i, c := range chunks {
		docs[i], _ = json.Marshal(map[string]string{"_id": c.ID, "_rev": fmt.Sprintf("1-%032x", i), "type": "leaf", "data": c.Data})
	}
	if _, err := st.BulkDocs(t.Context(), docs); err != nil {
		t.Fatal(err)
	}
	u := newUpstream(b, Upstream{Name: name, Kind: KindCouchDB, Mode: ModeSource, ThrottleKey: "couch.invalid:5984", Docs: storeCouch{st}})
	u.installCouchSource(nil)
	return u
}

// plainEnvelopes opens the RawChunk envelopes src finds into plain chunks.
type plainEnvelopes struct{ engine.ChunkSource }

func (p plainEnvelopes) FetchChunks(ctx context.Context, ids []engine.ChunkID) (engine.FetchResult, error) {
	res, err := p.ChunkSource.FetchChunks(ctx, ids)
	if err != nil {
		return res, err
	}
	for i, env := range res.Found {
		rc, err := openEnvelope(env)
		if err != nil {
			return engine.FetchResult{}, err
		}
		d, err := livesync.ParseDoc(rc.Doc)
		if err != nil {
			return engine.FetchResult{}, err
		}
		c, err := livesync.ParseChunk(d)
		if err != nil {
			return engine.FetchResult{}, err
		}
		res.Found[i] = c
	}
	return res, nil
}

func testBridge() *Bridge { return &Bridge{log: slog.New(slog.DiscardHandler)} }

func TestChunkSourceSuiteCouchUpstream(t *testing.T) {
	enginetest.ChunkSourceSuite(t,
		func(t *testing.T, chunks []engine.Chunk) (engine.ChunkSource, func()) {
			return plainEnvelopes{couchUpstream(t, testBridge(), "a", chunks)}, nil
		},
		func(t *testing.T) (engine.ChunkSource, func()) { // its handshake has not finished
			u := newUpstream(testBridge(), Upstream{Name: "a", Kind: KindCouchDB, Mode: ModeSource, ThrottleKey: "couch.invalid:5984"})
			return plainEnvelopes{u}, nil
		})
}

// The source of one throttle key, as New builds it: the upstreams on the
// key asked in order, metered. The chunks are split between two of them.
func TestChunkSourceSuiteKeySource(t *testing.T) {
	keySource := func(ups ...*upstream) engine.ChunkSource {
		members := make([]engine.ChunkSource, len(ups))
		for i, u := range ups {
			members[i] = u
		}
		return decorate.Metered(decorate.Multi("couch.invalid:5984", members...), &decorate.Meter{})
	}
	enginetest.ChunkSourceSuite(t,
		func(t *testing.T, chunks []engine.Chunk) (engine.ChunkSource, func()) {
			b, half := testBridge(), len(chunks)/2
			return plainEnvelopes{keySource(couchUpstream(t, b, "a", chunks[:half]), couchUpstream(t, b, "b", chunks[half:]))}, nil
		},
		func(t *testing.T) (engine.ChunkSource, func()) { // no upstream connected yet
			b := testBridge()
			spec := Upstream{Kind: KindCouchDB, Mode: ModeSource, ThrottleKey: "couch.invalid:5984"}
			return plainEnvelopes{keySource(newUpstream(b, spec), newUpstream(b, spec))}, nil
		})
}
