package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/store/boltstore"
)

// session runs commands in-process against one local replica, with a
// fixed clock and an optional stdin.
type session struct {
	t     *testing.T
	store string
	env   map[string]string
	now   time.Time
	wrap  func(store.Store) store.Store
}

func newSession(t *testing.T) *session {
	return &session{t: t, store: filepath.Join(t.TempDir(), "store.db"), env: map[string]string{},
		now: time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)}
}

// run runs one command with --store and returns its exit code and output.
func (s *session) run(stdin string, args ...string) (int, string, string) {
	s.t.Helper()
	var out, errb bytes.Buffer
	env := &cliEnv{ctx: context.Background(), stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb,
		getenv: func(k string) string { return s.env[k] }, now: func() time.Time { return s.now }, wrapStore: s.wrap}
	args = append(args, "--store", s.store)
	code := runEnv(env, args)
	return code, out.String(), errb.String()
}

// ok runs a command that must succeed and returns its stdout.
func (s *session) ok(stdin string, args ...string) string {
	s.t.Helper()
	code, out, errs := s.run(stdin, args...)
	if code != exitOK {
		s.t.Fatalf("%v: exit %d: %s", args, code, errs)
	}
	return out
}

// openStore opens the session's replica directly.
func (s *session) openStore() store.Store {
	s.t.Helper()
	st, err := boltstore.Open(s.store, boltstore.Options{})
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { st.Close() })
	return st
}

func TestPutLsCatRm(t *testing.T) {
	s := newSession(t)
	src := filepath.Join(t.TempDir(), "today.md")
	body := []byte("# Today\n\nUnicode: Ünïcode Ñame, and a long line " + strings.Repeat("x", 300) + "\n")
	if err := os.WriteFile(src, body, 0o644); err != nil {
		t.Fatal(err)
	}
	fileTime := time.UnixMilli(1700000000000)
	if err := os.Chtimes(src, fileTime, fileTime); err != nil {
		t.Fatal(err)
	}
	out := s.ok("", "put", "Notes/Today.md", src)
	if !strings.Contains(out, fmt.Sprintf("Notes/Today.md: %d bytes", len(body))) {
		t.Errorf("put said %q", out)
	}
	s.ok("binary\x00\xff", "put", "attachments/blob.bin", "-")
	if out := s.ok("", "put", "Notes/Today.md", src); !strings.Contains(out, "unchanged") {
		t.Errorf("a second put of the same bytes: %q, want unchanged", out)
	}

	// ls: both files with sizes, mtimes and complete chunks.
	out = s.ok("", "ls")
	for _, want := range []string{"SIZE", "Notes/Today.md", "attachments/blob.bin", "2023-11-14"} {
		if !strings.Contains(out, want) {
			t.Errorf("ls lacks %q:\n%s", want, out)
		}
	}
	var ls struct {
		OK    bool `json:"ok"`
		Files []struct {
			Path          string `json:"path"`
			Size          int64  `json:"size"`
			MTime         int64  `json:"mtime"`
			Chunks        int    `json:"chunks"`
			ChunksLocal   int    `json:"chunks_local"`
			ChunksMissing int    `json:"chunks_missing"`
		} `json:"files"`
	}
	if err := json.Unmarshal([]byte(s.ok("", "ls", "--json")), &ls); err != nil {
		t.Fatal(err)
	}
	if !ls.OK || len(ls.Files) != 2 || ls.Files[0].Path != "Notes/Today.md" || ls.Files[0].Size != int64(len(body)) ||
		ls.Files[0].MTime != 1700000000000 || ls.Files[0].ChunksMissing != 0 || ls.Files[0].ChunksLocal != ls.Files[0].Chunks ||
		ls.Files[1].MTime != s.now.UnixMilli() {
		t.Errorf("ls --json: %+v", ls)
	}
	if out := s.ok("", "ls", "attach"); strings.Contains(out, "Today") || !strings.Contains(out, "blob.bin") {
		t.Errorf("ls with a prefix:\n%s", out)
	}

	// cat: the bytes, for text and binary; case-insensitive ids as the plugin.
	if out := s.ok("", "cat", "Notes/Today.md"); out != string(body) {
		t.Errorf("cat: %q", out)
	}
	if out := s.ok("", "cat", "notes/today.md"); out != string(body) {
		t.Errorf("cat with other case: %q", out)
	}
	if out := s.ok("", "cat", "attachments/blob.bin"); out != "binary\x00\xff" {
		t.Errorf("cat binary: %q", out)
	}

	// put with new content: a new revision keeping ctime.
	s.now = s.now.Add(time.Hour)
	s.ok("v2\n", "put", "Notes/Today.md")
	st := s.openStore()
	ctx := context.Background()
	raw, err := st.Get(ctx, "notes/today.md", store.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	d, _ := livesync.ParseDoc(raw)
	m, _ := livesync.ParseMeta(d)
	if !strings.HasPrefix(m.Rev, "2-") || m.CTime != 1700000000000 || m.MTime != s.now.UnixMilli() || m.Size != 3 {
		t.Errorf("after a second put: %+v", m)
	}

	// rm: a soft deletion, as the plugin does: deleted:true, mtime now,
	// children kept, no _deleted tombstone.
	s.now = s.now.Add(time.Hour)
	if out := s.ok("", "rm", "Notes/Today.md"); !strings.Contains(out, "deleted, revision 3-") {
		t.Errorf("rm said %q", out)
	}
	st = s.openStore()
	raw, err = st.Get(ctx, "notes/today.md", store.GetOptions{})
	if err != nil {
		t.Fatalf("a soft-deleted file must stay readable as a document: %v", err)
	}
	st.Close()
	var fields map[string]any
	_ = json.Unmarshal(raw, &fields)
	if fields["deleted"] != true || fields["_deleted"] != nil || fields["mtime"] != float64(s.now.UnixMilli()) || len(fields["children"].([]any)) != 1 {
		t.Errorf("deleted document: %s", raw)
	}
	if out := s.ok("", "ls"); strings.Contains(out, "Today") {
		t.Errorf("ls shows a deleted file:\n%s", out)
	}
	if out := s.ok("", "ls", "--deleted"); !strings.Contains(out, "Notes/Today.md (deleted)") {
		t.Errorf("ls --deleted:\n%s", out)
	}
	if code, _, errs := s.run("", "cat", "Notes/Today.md"); code != exitFailed || !strings.Contains(errs, "no file") {
		t.Errorf("cat of a deleted file: exit %d %q", code, errs)
	}
	if code, _, errs := s.run("", "rm", "nothing.md"); code != exitFailed || strings.Count(errs, "\n") != 1 {
		t.Errorf("rm of a missing file: exit %d %q", code, errs)
	}
	// A put revives a deleted file.
	s.ok("back\n", "put", "Notes/Today.md")
	if out := s.ok("", "cat", "Notes/Today.md"); out != "back\n" {
		t.Errorf("cat after revival: %q", out)
	}
}

// Chunks are written before the metadata that names them: in the
// replica's changes feed (the order a push sends), every chunk of a file
// comes before the file's metadata.
func TestPutWritesChunksBeforeMetadata(t *testing.T) {
	s := newSession(t)
	big := strings.Repeat("a line of text that will be split into several chunks\n", 200)
	s.ok(big, "put", "big.md")
	s.ok(big+"more\n", "put", "big.md")
	s.ok("small\n", "put", "small.md")
	st := s.openStore()
	page, err := st.Changes(context.Background(), engine.ChangesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	metas := 0
	for _, c := range page.Results {
		if strings.HasPrefix(c.ID, "h:") {
			seen[c.ID] = true
			continue
		}
		raw, err := st.Get(context.Background(), c.ID, store.GetOptions{})
		if err != nil {
			continue
		}
		d, _ := livesync.ParseDoc(raw)
		if !d.IsFileDoc() {
			continue
		}
		metas++
		m, _ := livesync.ParseMeta(d)
		for _, id := range m.Children {
			if !seen[id] {
				t.Errorf("%s comes before its chunk %s in the changes feed", m.Path, id)
			}
		}
	}
	if metas != 2 || len(seen) < 3 {
		t.Fatalf("%d file documents, %d chunks", metas, len(seen))
	}
}

func TestStatus(t *testing.T) {
	s := newSession(t)
	if code, _, errs := s.run("", "status"); code != exitFailed || !strings.Contains(errs, "pull from a remote first") {
		t.Fatalf("status without a replica: exit %d %q", code, errs)
	}
	s.ok("one\n", "put", "a.md")
	s.ok("two\n", "put", "b.md")
	s.ok("", "rm", "b.md")
	// A held file: metadata whose chunk is not local (as after a
	// metadata-only pull).
	st := s.openStore()
	doc := `{"_id":"held.md","path":"held.md","children":["h:missing1","h:missing2"],"size":6,"type":"plain","ctime":1,"mtime":1,"eden":{}}`
	if _, err := st.Put(context.Background(), json.RawMessage(doc)); err != nil {
		t.Fatal(err)
	}
	st.Close()
	out := s.ok("", "status")
	for _, want := range []string{"not encrypted, chunk size 60", "2 files, 1 deleted files", "1 file wait for 2 chunks"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	var st2 struct {
		OK            bool     `json:"ok"`
		Files         int      `json:"files"`
		DeletedFiles  int      `json:"deleted_files"`
		HeldFiles     int      `json:"held_files"`
		MissingChunks int      `json:"missing_chunks"`
		Held          []string `json:"held"`
		Chunks        int      `json:"chunks"`
		NodeID        string   `json:"node_id"`
	}
	if err := json.Unmarshal([]byte(s.ok("", "status", "--json")), &st2); err != nil {
		t.Fatal(err)
	}
	if !st2.OK || st2.Files != 2 || st2.DeletedFiles != 1 || st2.HeldFiles != 1 || st2.MissingChunks != 2 ||
		len(st2.Held) != 1 || st2.Held[0] != "held.md" || st2.Chunks != 2 || len(st2.NodeID) != 10 {
		t.Errorf("status --json: %+v", st2)
	}
	if code, _, errs := s.run("", "cat", "held.md"); code != exitFailed || !strings.Contains(errs, "2 of 2 chunks") || !strings.Contains(errs, "--remote") {
		t.Errorf("cat of a held file: exit %d %q", code, errs)
	}
}

func TestEncryptedVaultNeedsPassphrase(t *testing.T) {
	s := newSession(t)
	if code, _, errs := s.run("x\n", "put", "a.md", "--encrypt", "--obfuscate-paths"); code != exitUsage || !strings.Contains(errs, "LIVESYNC_PASSPHRASE") {
		t.Fatalf("put into a new encrypted vault without a passphrase: exit %d %q", code, errs)
	}
	s.env["LIVESYNC_PASSPHRASE"] = "pass one"
	s.ok("secret note\n", "put", "a.md")
	st := s.openStore()
	infos, _ := st.AllDocs(context.Background(), store.AllDocsOptions{})
	st.Close()
	for _, in := range infos {
		if !strings.HasPrefix(in.ID, "h:+") && !strings.HasPrefix(in.ID, "f:") {
			t.Errorf("an encrypted, obfuscated vault has the id %q", in.ID)
		}
	}
	if out := s.ok("", "cat", "a.md"); out != "secret note\n" {
		t.Errorf("cat: %q", out)
	}
	// Another passphrase would give other ids: it is refused before
	// anything is written.
	s.env["LIVESYNC_PASSPHRASE"] = "pass two"
	for _, args := range [][]string{{"cat", "a.md"}, {"put", "b.md"}, {"rm", "a.md"}} {
		code, _, errs := s.run("new\n", args...)
		if code != exitPassphrase || strings.Contains(errs, "pass two") || strings.Contains(errs, "pass one") || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v with another passphrase: exit %d %q", args, code, errs)
		}
	}
	s.env["LIVESYNC_PASSPHRASE"] = "pass one"
	if out := s.ok("", "ls"); strings.Contains(out, "b.md") || !strings.Contains(out, "a.md") {
		t.Errorf("after the refused commands:\n%s", out)
	}
}

// failingStore fails every write with err after the first n writes.
type failingStore struct {
	store.Store
	n   int
	err error
}

func (f *failingStore) fail() error {
	if f.n > 0 {
		f.n--
		return nil
	}
	return &engine.Error{Op: "write", Stage: engine.StageStorage, Err: f.err}
}

func (f *failingStore) PutChunks(ctx context.Context, c []engine.Chunk) error {
	if err := f.fail(); err != nil {
		return err
	}
	return f.Store.PutChunks(ctx, c)
}

func (f *failingStore) Put(ctx context.Context, doc json.RawMessage) (string, error) {
	if err := f.fail(); err != nil {
		return "", err
	}
	return f.Store.Put(ctx, doc)
}

func (f *failingStore) BulkDocs(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	if err := f.fail(); err != nil {
		return nil, err
	}
	return f.Store.BulkDocs(ctx, docs)
}

// A write of the local replica that fails gives exit 8 and one line; a
// full disk says so. The failure is injected at the store port (bbolt
// cannot be made to fail here without a tiny filesystem; the integration
// tests do that with a real tmpfs).
func TestLocalStorageFailure(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"disk full", &os.PathError{Op: "write", Path: "store.db", Err: syscall.ENOSPC}, "no space left on the device"},
		{"read-only", &os.PathError{Op: "write", Path: "store.db", Err: syscall.EROFS}, "read-only file system"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSession(t)
			s.ok("first\n", "put", "a.md")
			s.wrap = func(st store.Store) store.Store { return &failingStore{Store: st, err: tc.err} }
			code, _, errs := s.run("second\n", "put", "b.md")
			if code != exitLocal || !strings.Contains(errs, tc.want) || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, s.store) {
				t.Fatalf("exit %d, stderr %q; want exit %d, one line naming the store and %q", code, errs, exitLocal, tc.want)
			}
			s.wrap = nil
			if out := s.ok("", "ls"); strings.Contains(out, "b.md") || !strings.Contains(out, "a.md") {
				t.Errorf("after the failed put:\n%s", out)
			}
		})
	}
}

// Writing to a full disk: cat into /dev/full.
func TestCatToFullDevice(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		// Every Linux CI machine has /dev/full: there the test must run.
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set but /dev/full cannot be opened: %v", err)
		}
		t.Skip("no /dev/full on this system")
	}
	defer full.Close()
	s := newSession(t)
	s.ok("data\n", "put", "a.md")
	var errb bytes.Buffer
	env := &cliEnv{ctx: context.Background(), stdin: strings.NewReader(""), stdout: full, stderr: &errb,
		getenv: func(string) string { return "" }}
	if code := runEnv(env, []string{"cat", "a.md", "--store", s.store}); code != exitLocal || !strings.Contains(errb.String(), "no space left") {
		t.Fatalf("cat > /dev/full: exit %d %q", code, errb.String())
	}
}

func TestVaultPathOf(t *testing.T) {
	for in, want := range map[string]string{
		"notes/a.md":   "notes/a.md",
		"/notes/a.md":  "notes/a.md",
		"notes\\a.md":  "notes/a.md",
		".obsidian/x":  "i:.obsidian/x",
		"a/.hidden.md": "i:a/.hidden.md",
		"../../etc/pw": "etc/pw",
	} {
		got, err := vaultPathOf(in)
		if err != nil || got != want {
			t.Errorf("vaultPathOf(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "/", "ix:plugin", "f:abc"} {
		if _, err := vaultPathOf(bad); !errors.As(err, new(usageError)) {
			t.Errorf("vaultPathOf(%q): %v, want a usage error", bad, err)
		}
	}
}
