package fetch_test

import (
	"context"
	"fmt"
	"log"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/activity"
	"github.com/livesync-go/livesync-go/engine/enginetest"
	"github.com/livesync-go/livesync-go/engine/fetch"
)

// A reader asks for chunks its metadata names; missing ones are fetched
// from the remote by id, persisted, and delivered. Nothing waits on a
// clock: an id ends when the remote delivers it, or answers it lacks it
// and no replication can still bring it.
func Example() {
	store := enginetest.NewMemChunks()
	// remote has one chunk; every other id is answered missing.
	remote := enginetest.MapSource{Key: "couch.example:443", Chunks: map[engine.ChunkID]string{"h:1k1pm0uba4xzy": "# Hello\n"}}
	act := activity.New(nil)
	claims := fetch.NewCoordinator()
	f, err := fetch.New(fetch.Config{}, fetch.Deps{Source: remote, Local: store, Activity: act, Claims: claims})
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
