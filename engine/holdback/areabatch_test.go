package holdback

import (
	"encoding/json"
	"slices"
	"testing"
)

// editIndex edits the index as indexUpdate would, without decoding it,
// and declines what it cannot edit so.
func TestEditIndexMatchesIndexUpdate(t *testing.T) {
	for _, shared := range []bool{false, true} {
		a := &area{shared: shared}
		old := json.RawMessage(`{"docs":["b","d","f"],"gen":4}`)
		add, remove := []string{"a", "d", "e", "g"}, map[string]bool{"b": true, "x": true}
		got, ok := a.editIndex(old, add, remove, true)
		if !ok {
			t.Fatal("declined a plain index")
		}
		want, _ := a.indexUpdate(old, func(set map[string]struct{}) bool {
			for _, d := range add {
				set[d] = struct{}{}
			}
			for d := range remove {
				delete(set, d)
			}
			return true
		})
		gi, err1 := decodeIndex(got)
		wi, err2 := decodeIndex(want)
		if err1 != nil || err2 != nil || !slices.Equal(gi.Docs, wi.Docs) || gi.Gen != wi.Gen {
			t.Errorf("shared %v: got %s, want %s", shared, got, want)
		}
	}
	a := &area{}
	for _, b := range []string{`{"docs":["b","a"]}`, `{"docs":["a\u0041"]}`, `{"gen":1}`} {
		if _, ok := a.editIndex(json.RawMessage(b), []string{"c"}, nil, true); ok {
			t.Errorf("%s: edited", b)
		}
	}
	if out, ok := a.editIndex(json.RawMessage(`{"docs":["a"]}`), nil, map[string]bool{"z": true}, false); !ok || string(out) != `{"docs":["a"]}` {
		t.Errorf("an edit changing nothing: %s %v", out, ok)
	}
}
