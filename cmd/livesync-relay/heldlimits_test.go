package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/engine/holdback"
)

// The [holdback] table of relay.example.toml sets the limits of held
// documents, and reaches the engine with the keys a refusal names.
func TestHoldbackLimitsConfig(t *testing.T) {
	c, err := loadConfig("relay.example.toml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Holdback.MaxHeldDocuments != holdback.DefaultMaxHeldDocuments || c.Holdback.MaxHeldDocumentsPerUser != holdback.DefaultMaxHeldPerOwner {
		t.Errorf("example [holdback] %+v: the example should show the defaults", c.Holdback)
	}
	hc := c.holdbackConfig()
	if hc.MaxHeldDocuments != 10000 || hc.MaxHeldPerOwner != 2000 || hc.Purgatory.PushedDelay != c.Purgatory.PushedDelay ||
		!strings.Contains(hc.MaxHeldDocumentsName, "[holdback] max_held_documents ") ||
		!strings.Contains(hc.MaxHeldPerOwnerName, "[holdback] max_held_documents_per_user") {
		t.Errorf("holdback config %+v", hc)
	}
	// Absent means the engine's defaults.
	empty, err := parseConfig("", "")
	if err != nil {
		t.Fatal(err)
	}
	if hc := empty.holdbackConfig(); hc.MaxHeldDocuments != 0 || hc.MaxHeldPerOwner != 0 || hc.Validate() != nil {
		t.Errorf("no [holdback]: %+v", hc)
	}
	for _, tc := range []struct{ text, want string }{
		{"[holdback]\nmax_held_documents = -1", "holdback.max_held_documents is negative"},
		{"[holdback]\nmax_held_documents_per_user = -5", "holdback.max_held_documents_per_user is negative"},
		{"[holdback]\nmax_held = 5", "unknown key(s) holdback.max_held"},
	} {
		c, err := parseConfig(tc.text, "relay.toml")
		if err == nil {
			err = c.validate()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.text, err, tc.want)
		}
	}
}

// /status lists at most heldListed held documents, the first by id, with
// the total and a note; the holdback section counts them all.
func TestStatusHeldListBounded(t *testing.T) {
	rn := startAdmin(t, t.TempDir())
	var docs []map[string]any
	for i := range heldListed + 50 {
		id := fmt.Sprintf("notes/n%04d.md", i)
		docs = append(docs, map[string]any{"_id": id, "_rev": "1-aaaa", "_revisions": map[string]any{"start": 1, "ids": []string{"aaaa"}},
			"path": id, "children": []string{fmt.Sprintf("h:c%04d", i)}, "ctime": 1700000000000, "mtime": 1700000000000,
			"size": 5, "type": "plain", "eden": map[string]any{}})
	}
	rn.admin("POST", "/vault/_bulk_docs", map[string]any{"docs": docs, "new_edits": false}, 201)
	d := rn.status().db(t, "vault")
	if len(d.Held) != heldListed || d.HeldDocuments != heldListed+50 || d.Held[0].Doc != "notes/n0000.md" ||
		d.Held[heldListed-1].Doc != fmt.Sprintf("notes/n%04d.md", heldListed-1) ||
		d.HeldNote != "100 of 150 held documents listed (the first by id); held_documents and /metrics count them all" {
		t.Fatalf("held %d listed of %d, note %q", len(d.Held), d.HeldDocuments, d.HeldNote)
	}
	if h := d.Holdback; h.HeldRevisions != 150 || h.HeldByUser[defaultAdminName] != 150 || h.MaxHeldDocuments != holdback.DefaultMaxHeldDocuments ||
		h.MaxHeldDocumentsPerUser != holdback.DefaultMaxHeldPerOwner || h.Refused != 0 {
		t.Fatalf("holdback %+v", h)
	}
	_, m := rn.do("GET", "/metrics", rn.user, rn.pass, nil)
	if !strings.Contains(string(m), `livesync_relay_held_revisions{db="vault"} 150`) ||
		!strings.Contains(string(m), `outcome="refused"} 0`) {
		t.Errorf("/metrics does not count them all")
	}
}
