package fetch_test

import (
	"context"
	"fmt"
	"log"
	"sync"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/activity"
	"github.com/livesync-go/livesync-go/engine/fetch"
)

// memStore is a LocalChunks kept in a map.
type memStore struct {
	mu sync.Mutex
	m  map[engine.ChunkID]engine.Chunk
}

func (s *memStore) GetChunks(_ context.Context, ids []engine.ChunkID) (map[engine.ChunkID]engine.Chunk, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[engine.ChunkID]engine.Chunk{}
	for _, id := range ids {
		if c, ok := s.m[id]; ok {
			out[id] = c
		}
	}
	return out, nil
}

func (s *memStore) PutChunks(_ context.Context, cs []engine.Chunk) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range cs {
		s.m[c.ID] = c
	}
	return nil
}

// remote is a ChunkSource that has one chunk.
type remote struct{}

func (remote) FetchChunks(_ context.Context, ids []engine.ChunkID) (engine.FetchResult, error) {
	var r engine.FetchResult
	for _, id := range ids {
		if id == "h:1k1pm0uba4xzy" {
			r.Found = append(r.Found, engine.Chunk{ID: id, Data: "# Hello\n"})
		} else {
			r.Missing = append(r.Missing, id)
		}
	}
	return r, nil
}
func (remote) CanFetchDirect() bool { return true }
func (remote) ThrottleKey() string  { return "couch.example:443" }

// A reader asks for chunks its metadata names; missing ones are fetched
// from the remote by id, persisted, and delivered. Nothing waits on a
// clock: an id ends when the remote delivers it, or answers it lacks it
// and no replication can still bring it.
func Example() {
	store := &memStore{m: map[engine.ChunkID]engine.Chunk{}}
	act := activity.New(nil)
	claims := fetch.NewCoordinator()
	f, err := fetch.New(fetch.Config{}, fetch.Deps{Source: remote{}, Local: store, Activity: act, Claims: claims})
	if err != nil {
		log.Fatal(err)
	}
	layer, err := fetch.NewLayer(fetch.LayerConfig{}, fetch.LayerDeps{Local: store, Activity: act, Claims: claims, Fetcher: f})
	if err != nil {
		log.Fatal(err)
	}
	defer func() { layer.Close(); f.Close(); claims.Close(); act.Close() }()

	res, err := layer.Get(context.Background(), []engine.ChunkID{"h:1k1pm0uba4xzy"}, fetch.ReadOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%q %v\n", res[0].Chunk.Data, res[0].OK)
	st := f.Stats()
	fmt.Println("requests:", st.Requests, "delivered:", st.Delivered, "pending:", st.Pending())
	// Output:
	// "# Hello\n" true
	// requests: 1 delivered: 1 pending: 0
}
