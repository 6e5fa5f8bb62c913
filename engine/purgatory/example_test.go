package purgatory_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/enginetest"
	"github.com/livesync-go/livesync-go/engine/fetch"
	"github.com/livesync-go/livesync-go/engine/hold"
	"github.com/livesync-go/livesync-go/engine/hunt"
	"github.com/livesync-go/livesync-go/engine/purgatory"
)

// A note's metadata arrives before its chunks. The purgatory holds it (it
// is not served), the hunt looks for the two chunks on every known
// source — here each of two servers has one — and the note is released
// once both are local.
func Example() {
	local := enginetest.NewMemChunks()
	released := make(chan string, 1)

	var p *purgatory.Purgatory
	h, err := hunt.New(hunt.Config{}, hunt.Deps{
		Local:       local,
		Claims:      fetch.NewCoordinator(),
		OnDelivered: func(ids []engine.ChunkID) { p.ChunksArrived(ids) },
	})
	if err != nil {
		log.Fatal(err)
	}
	h.AddSource(enginetest.MapSource{Key: "home.example:5984", Chunks: map[engine.ChunkID]string{"h:a": "# Hello\n"}}, nil)
	h.AddSource(enginetest.MapSource{Key: "backup.example:443", Chunks: map[engine.ChunkID]string{"h:b": "world\n"}}, nil)

	// The first hunt starts 100 ms after Hold (a real clock here); with
	// 1 ms a loaded race-detector run hunted and released the note before
	// Hold had reported it held.
	p, err = purgatory.New(purgatory.Config{PulledDelay: 100 * time.Millisecond}, purgatory.Deps{
		Local:  local,
		Hunter: h,
		// Release verifies (decrypt, size) and materialises the file.
		Release: func(_ context.Context, doc, rev string) error {
			released <- doc + "@" + rev
			return nil
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer func() { p.Close(); h.Close() }()

	out, err := p.Hold(context.Background(), hold.Revision{
		Doc: "notes/hello.md", Rev: "1-abc", Chunks: []engine.ChunkID{"h:a", "h:b"},
	}, "home.example:5984")
	fmt.Println(out, err)
	fmt.Println("released", <-released)
	// Output:
	// held <nil>
	// released notes/hello.md@1-abc
}
