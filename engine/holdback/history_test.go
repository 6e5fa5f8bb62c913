package holdback

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"testing/synctest"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
)

// revsInfo reads id's _revs_info through the hold-back as "rev status".
func (r *rig) revsInfo(id string) []string {
	r.t.Helper()
	b, err := r.s.Get(bg, id, store.GetOptions{RevsInfo: true})
	if err != nil {
		r.t.Fatalf("Get %s with RevsInfo: %v", id, err)
	}
	var d struct {
		Info []struct{ Rev, Status string } `json:"_revs_info"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		r.t.Fatal(err)
	}
	var out []string
	for _, e := range d.Info {
		out = append(out, e.Rev+" "+e.Status)
	}
	return out
}

// Revision history through the hold-back: a held revision is in
// no _revs_info and cannot be read by ?rev= until released; Compact,
// RevsLimit and SetRevsLimit reach the inner store, and compaction leaves
// held revisions alone.
func TestHistoryHidesHeldRevisions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inner, err := store.NewMemory(store.Options{Name: "relay", KeepBodies: store.KeepAllBodies})
		if err != nil {
			t.Fatal(err)
		}
		r := newRig(t, Config{}, Deps{Inner: inner})
		r.push(chunk("h:0"), meta("a.md", "1-a", "h:0"))
		r.push(metaHist("a.md", "2-b", []string{"a"}, "h:0", "h:1")) // h:1 missing: held
		if _, _, ok := r.heldDoc("a.md"); !ok {
			t.Fatalf("2-b is not held: %+v", r.s.Held())
		}
		if got, want := r.revsInfo("a.md"), []string{"1-a available"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("_revs_info while 2-b is held = %v, want %v", got, want)
		}
		if _, err := r.s.Get(bg, "a.md", store.GetOptions{Rev: "2-b", RevsInfo: true}); !errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("Get of the held revision = %v, want ErrNotFound", err)
		}

		if err := r.s.Compact(bg); err != nil {
			t.Fatal(err)
		}
		if err := r.s.SetRevsLimit(bg, 5); err != nil {
			t.Fatal(err)
		}
		if n, err := inner.RevsLimit(bg); err != nil || n != 5 {
			t.Fatalf("inner RevsLimit = %d, %v; SetRevsLimit did not pass through", n, err)
		}
		if n, err := r.s.RevsLimit(bg); err != nil || n != 5 {
			t.Fatalf("RevsLimit = %d, %v", n, err)
		}

		r.push(chunk("h:1"))
		synctest.Wait()
		if got, want := r.revsInfo("a.md"), []string{"2-b available", "1-a available"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("_revs_info after the release = %v, want %v", got, want)
		}
		if err := r.s.Compact(bg); err != nil {
			t.Fatal(err)
		}
		if got, want := r.revsInfo("a.md"), []string{"2-b available", "1-a missing"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("_revs_info after Compact = %v, want %v", got, want)
		}
		r.s.Close()
		if err := r.s.Compact(bg); !errors.Is(err, store.ErrClosed) {
			t.Fatalf("Compact after Close = %v, want ErrClosed", err)
		}
	})
}
