package hold

import (
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/engine/livesync"
)

func TestFromMeta(t *testing.T) {
	m := livesync.Meta{ID: "n.md", Rev: "2-x", Children: []string{"h:1", "h:e", "h:2", "h:1"},
		Eden: map[string]livesync.EdenEntry{"h:e": {Data: "embedded"}}}
	r := FromMeta(m)
	if r.Doc != "n.md" || r.Rev != "2-x" || strings.Join(r.Chunks, ",") != "h:1,h:2,h:1" {
		t.Fatalf("FromMeta = %+v", r)
	}
	m.Deleted = true
	if r := FromMeta(m); len(r.Chunks) != 0 {
		t.Fatalf("tombstone needs chunks: %+v", r)
	}
	if r := FromMeta(livesync.Meta{ID: "old", Rev: "1-a", Type: livesync.TypeNotes, Data: []string{"x"}}); len(r.Chunks) != 0 {
		t.Fatalf("inline note needs chunks: %+v", r)
	}
}

func TestOutcomeString(t *testing.T) {
	want := map[Outcome]string{Released: "released", Held: "held", Superseded: "superseded",
		PreviouslyExpired: "previously expired", Rejected: "rejected", Dropped: "dropped", 0: "Outcome(0)"}
	for o, s := range want {
		if o.String() != s {
			t.Errorf("%d: %q, want %q", o, o.String(), s)
		}
	}
}
