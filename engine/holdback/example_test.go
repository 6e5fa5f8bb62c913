package holdback_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/holdback"
	"github.com/livesync-go/livesync-go/engine/store"
)

// A client pushes a note's metadata before its chunk. Another client
// reading the feed does not see the note until the chunk is pushed; then
// it appears after the reader's checkpoint.
func Example() {
	ctx := context.Background()
	inner, err := store.NewMemory(store.Options{Name: "vault"})
	if err != nil {
		log.Fatal(err)
	}
	st, err := holdback.New(holdback.Config{}, holdback.Deps{Inner: inner})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	note := json.RawMessage(`{"_id":"hello.md","_rev":"1-a","type":"plain","path":"hello.md","children":["h:1"],"size":6}`)
	res, _ := st.BulkDocs(ctx, []json.RawMessage{note})
	fmt.Println("pushed", res[0].ID, res[0].Rev, st.Mode())

	page, _ := st.Changes(ctx, engine.ChangesRequest{})
	fmt.Println("feed:", len(page.Results), "changes; held:", st.Held()[0].Doc, st.Held()[0].Missing, "chunk missing")

	st.BulkDocs(ctx, []json.RawMessage{json.RawMessage(`{"_id":"h:1","_rev":"1-c","type":"leaf","data":"Hello\n"}`)})
	for since := page.LastSeq; ; {
		page, _ = st.Changes(ctx, engine.ChangesRequest{Since: since, Wait: true})
		for _, c := range page.Results {
			fmt.Println("after the checkpoint:", c.ID)
		}
		if len(page.Results) > 0 && page.Results[len(page.Results)-1].ID == "hello.md" {
			break
		}
		since = page.LastSeq
	}
	// Output:
	// pushed hello.md 1-a holdback
	// feed: 0 changes; held: hello.md 1 chunk missing
	// after the checkpoint: h:1
	// after the checkpoint: hello.md
}
