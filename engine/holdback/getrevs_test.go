package holdback

import (
	"encoding/json"
	"reflect"
	"testing"
	"testing/synctest"

	"github.com/livesync-go/livesync-go/engine/store"
)

// GetRevs (open_revs, _bulk_get) passes through to the inner store, where
// a held revision is not: it stays invisible, as with Get and BulkGet.
func TestGetRevsHidesHeldRevisions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{}, Deps{})
		r.push(chunk("h:0"), meta("a.md", "1-a", "h:0")) // complete: stored
		r.push(meta("a.md", "1-b", "h:1"))               // a conflicting leaf whose chunk is missing: held
		if _, revs, ok := r.heldDoc("a.md"); !ok || !reflect.DeepEqual(revs, []string{"1-b"}) {
			t.Fatalf("Held = %+v", r.s.Held())
		}
		for _, opts := range []store.RevsOptions{
			{All: true},
			{Revs: []string{"1-a", "1-b"}},
			{Revs: []string{"1-a", "1-b"}, Latest: true, History: true},
		} {
			res, err := r.s.GetRevs(bg, "a.md", opts)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, rd := range res {
				for _, d := range rd.Docs {
					var h struct {
						Rev string `json:"_rev"`
					}
					if err := json.Unmarshal(d, &h); err != nil {
						t.Fatal(err)
					}
					got = append(got, rd.Rev+"="+h.Rev)
				}
			}
			if want := []string{"1-a=1-a"}; !reflect.DeepEqual(got, want) {
				t.Fatalf("GetRevs %+v served %v, want %v (the held 1-b invisible)", opts, got, want)
			}
		}
	})
}
