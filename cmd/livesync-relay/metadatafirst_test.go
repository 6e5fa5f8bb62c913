package main

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/engine/livesync"
)

// A push that sends every note's metadata before any chunk (as PouchDB
// does when its local feed has the metadata first) holds every note,
// then each batch of chunks releases the notes it completes. When the
// pusher's last request has been answered, every note is served: in
// one _changes read and by GET, with nothing left held.
func TestMetadataFirstPushIsServedWhenThePushReturns(t *testing.T) {
	rn := startAdmin(t, t.TempDir())
	codec := plainCodec(t)
	const notes, batch = 300, 25
	var metas, chunks []livesync.Doc
	var ids []string
	for i := range notes {
		m, cs := note(t, codec, fmt.Sprintf("Notes/%03d.md", i), fmt.Sprintf("# Note %d\n%s\n", i, strings.Repeat("words of the note ", 20+i%7)))
		metas, chunks = append(metas, m), append(chunks, cs...)
		ids = append(ids, m.ID())
	}
	for docs := range slices.Chunk(append(metas, chunks...), batch) {
		rn.pushDocs("vault", docs...)
	}

	inFeed := rn.changedIDs("vault")
	var notInFeed, notServed []string
	for _, id := range ids {
		if !slices.Contains(inFeed, id) {
			notInFeed = append(notInFeed, id)
		}
		if code, _ := rn.do("GET", "/vault/"+url.PathEscape(id), rn.user, rn.pass, nil); code != 200 {
			notServed = append(notServed, id)
		}
	}
	if len(notInFeed) > 0 || len(notServed) > 0 {
		t.Errorf("when the push returned, %d of %d notes were not in _changes (first %q) and %d not served by GET (first %q)",
			len(notInFeed), notes, append(notInFeed, "")[0], len(notServed), append(notServed, "")[0])
	}
	d := rn.status().db(t, "vault")
	if len(d.Held) != 0 || d.Holdback.Released != notes {
		t.Fatalf("after the push: %d held, %d released, want 0 and %d", len(d.Held), d.Holdback.Released, notes)
	}
}
