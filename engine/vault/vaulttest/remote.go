// Package vaulttest holds in-memory remotes for tests and examples of the
// vault client (engine/vault): a replication endpoint kept in an
// in-memory store, and a journal bucket kept in memory, each with the
// handshake's records in a negotiatetest.MemPort. They satisfy
// vault.Remote.
package vaulttest

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/enginetest"
	"github.com/livesync-go/livesync-go/engine/journalsync"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/negotiate/negotiatetest"
	"github.com/livesync-go/livesync-go/engine/store"
)

// Remote is a replication endpoint kept in an in-memory store (the
// remote form of the documents, as a CouchDB database holds them), or a
// journal kept in memory.
type Remote struct {
	id string

	mu      sync.Mutex
	port    *negotiatetest.MemPort
	st      store.Store            // the endpoint (nil for a journal)
	objects *enginetest.MemObjects // the journal (nil for an endpoint)
	direct  bool                   // a journal's chunks may be fetched by id
	journal bool                   // a journal (set once)
}

// NewRemote returns an empty replication endpoint named id.
func NewRemote(id string) *Remote {
	st, err := store.NewMemory(store.Options{Name: id})
	if err != nil {
		panic(err)
	}
	return &Remote{id: id, port: negotiatetest.NewMemPort(false), st: st}
}

// NewJournal returns an empty journal bucket named id; direct says
// whether its chunks may be fetched by id.
func NewJournal(id string, direct bool) *Remote {
	return &Remote{id: id, port: negotiatetest.NewMemPort(true), objects: enginetest.NewMemObjects("vault/", id), direct: direct, journal: true}
}

func (r *Remote) ID() string { return r.id }

// Negotiate is the remote's handshake port (negotiatetest.MemPort).
func (r *Remote) Negotiate() negotiate.Port { return r.Port() }

// Port is the remote's handshake port (to lock it in tests).
func (r *Remote) Port() *negotiatetest.MemPort {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.port
}

func (r *Remote) ChunkRange() negotiate.ChunkRange {
	if r.journal {
		return negotiate.JournalChunkRange
	}
	return negotiate.CouchDBChunkRange
}

// Endpoint is the remote's store, nil for a journal.
func (r *Remote) Endpoint() engine.Endpoint {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.st == nil {
		return nil
	}
	return r.st
}

// Store is the endpoint's store (nil for a journal).
func (r *Remote) Store() store.Store {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st
}

// Objects is the journal, nil for an endpoint.
func (r *Remote) Objects() journalsync.Objects {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.objects == nil {
		return nil
	}
	return r.objects
}

// Chunks is a source reading the endpoint's chunks (remote form decoded
// with codec); nil for a journal, whose chunks the vault fetches through
// its journal's pack index (DirectFetch).
func (r *Remote) Chunks(codec *livesync.Codec) engine.ChunkSource {
	if r.journal {
		return nil
	}
	return source{r: r, codec: codec}
}

// DirectFetch says whether a journal's chunks may be fetched by id.
func (r *Remote) DirectFetch() bool { return r.journal && r.direct }

// Reset deletes everything the remote holds.
func (r *Remote) Reset(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.port = negotiatetest.NewMemPort(r.journal)
	if r.journal {
		r.objects = enginetest.NewMemObjects("vault/", r.id)
		return nil
	}
	r.st.Close()
	st, err := store.NewMemory(store.Options{Name: r.id})
	r.st = st
	return err
}

// Close closes the endpoint's store.
func (r *Remote) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.st != nil {
		return r.st.Close()
	}
	return nil
}

// source fetches an endpoint's chunks by id, decoding them with codec.
type source struct {
	r     *Remote
	codec *livesync.Codec
}

func (s source) FetchChunks(ctx context.Context, ids []engine.ChunkID) (engine.FetchResult, error) {
	var res engine.FetchResult
	st := s.r.Store()
	for _, id := range ids {
		raw, err := st.Get(ctx, id, store.GetOptions{})
		if err != nil {
			res.Missing = append(res.Missing, id)
			continue
		}
		d, err := livesync.ParseDoc(raw)
		if err == nil {
			d, err = s.codec.DecodeRemote(d)
		}
		if err != nil {
			return engine.FetchResult{}, err
		}
		var c struct {
			Data string `json:"data"`
		}
		b, _ := json.Marshal(d)
		_ = json.Unmarshal(b, &c)
		res.Found = append(res.Found, engine.Chunk{ID: id, Data: c.Data})
	}
	return res, nil
}

func (s source) CanFetchDirect() bool { return true }
func (s source) ThrottleKey() string  { return s.r.id }
