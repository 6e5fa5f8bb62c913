package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// dropChunk deletes a chunk from the replica, as if it had never been
// pulled.
func dropChunk(t *testing.T, st store.Store, id string) {
	t.Helper()
	ctx := context.Background()
	raw, err := st.Get(ctx, id, store.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Rev string `json:"_rev"`
	}
	json.Unmarshal(raw, &d)
	b, _ := json.Marshal(map[string]any{"_id": id, "_rev": d.Rev, "_deleted": true})
	if _, err := st.Put(ctx, b); err != nil {
		t.Fatal(err)
	}
}

// hunt lists the held files: path, missing count, since when and from
// where (recorded by the pull that brought them), and when they were last
// hunted; nothing is scheduled.
func TestHuntListing(t *testing.T) {
	s := newSession(t)
	if out := func() string { s.ok("a\n", "put", "a.md"); return s.ok("", "hunt") }(); !strings.Contains(out, "nothing is held") {
		t.Errorf("hunt with nothing held: %q", out)
	}
	s.ok("b\n", "put", "notes/b.md")
	st := s.openStore()
	codec, _ := livesync.New(livesync.Config{Settings: livesync.Settings{CustomChunkSize: 60}})
	meta, chunks, _ := codec.FileDocs("notes/b.md", []byte("b\n"), 0, 0)
	dropChunk(t, st, chunks[0].ID)

	// The pull that brought notes/b.md recorded when and from where.
	rec, _ := json.Marshal(map[string]any{"docs": map[string]any{meta.ID: map[string]any{
		"rev": "1-x", "since": s.now, "source": "http://couch.example:5984/vault"}}})
	if err := st.PutLocal(context.Background(), vault.HeldRecordID, rec); err != nil {
		t.Fatal(err)
	}
	st.Close()

	out := s.ok("", "hunt")
	for _, want := range []string{"1 file is held", "notes/b.md", "1 of 1", s.now.Local().Format("2006-01-02 15:04:05"), "http://couch.example:5984/vault", "never", "none scheduled"} {
		if !strings.Contains(out, want) {
			t.Errorf("hunt lacks %q:\n%s", want, out)
		}
	}
	var js struct {
		Held []map[string]any `json:"held"`
	}
	json.Unmarshal([]byte(s.ok("", "hunt", "--json")), &js)
	if len(js.Held) != 1 || js.Held[0]["path"] != "notes/b.md" || js.Held[0]["missing"] != 1.0 || js.Held[0]["since"] != "2024-05-06T07:08:09Z" ||
		js.Held[0]["next_attempt"] != nil || js.Held[0]["last_attempt"] != nil {
		t.Errorf("hunt --json: %+v", js.Held)
	}
	if code, _, errs := s.run("", "hunt", "home"); code != exitUsage || !strings.Contains(errs, "--retry") {
		t.Errorf("hunt REMOTE without --retry: exit %d %q", code, errs)
	}
	if code, _, errs := s.run("", "hunt", "--retry", "--per-minute", "0"); code != exitUsage || !strings.Contains(errs, "--per-minute") {
		t.Errorf("hunt --per-minute 0: exit %d %q", code, errs)
	}
	if code, _, errs := s.run("", "hunt", "--retry"); code != exitUsage || !strings.Contains(errs, "no remote to hunt on") {
		t.Errorf("hunt --retry without remotes: exit %d %q", code, errs)
	}
	if out := s.ok("", "status"); !strings.Contains(out, "1 file wait") || !strings.Contains(out, "livesync hunt") {
		t.Errorf("status:\n%s", out)
	}
}
