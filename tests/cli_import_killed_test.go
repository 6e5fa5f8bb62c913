package tests

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/store/boltstore"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// TestCLIImportKilled kills `livesync import --store` with SIGKILL once it
// reports a first batch of files stored locally. The store then holds at
// least the files reported, each with every chunk it names (no metadata
// without its chunks), byte for byte. Run again, the import completes:
// the files already stored are unchanged, and an export of the remote
// gives back the folder byte for byte.
func TestCLIImportKilled(t *testing.T) {
	c := &cliRunner{bin: buildCLI(t), home: t.TempDir(), couch: couchServer(t)}
	src := t.TempDir()
	const n = 3000
	want := map[string][]byte{}
	for i := range n {
		rel := fmt.Sprintf("f%02d/note%04d.md", i%30, i)
		data := fmt.Appendf(nil, "# note %d\n\n%s\n", i, strings.Repeat(fmt.Sprintf("line %d of note %d\n", i%7, i), 20))
		want[rel] = data
		full := filepath.Join(src, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	name := dbName(t)
	t.Cleanup(func() {
		db := openDB(t, couchServer, name, false, nil)
		_ = db.Destroy(context.Background())
	})
	storePath := filepath.Join(t.TempDir(), "store.db")
	args := []string{"import", src, c.url(name), "--store", storePath}

	acked := importUntilKilled(t, c, args)
	files := storedFiles(t, storePath, want)
	if len(files) < acked {
		t.Fatalf("the import reported %d files stored, the store holds %d", acked, len(files))
	}
	t.Logf("killed after %d files were reported stored; the store holds %d", acked, len(files))

	r := c.ok(t, t.TempDir(), nil, append(args, "--quiet")...)
	if !strings.Contains(r.stdout, fmt.Sprintf("; %d unchanged", len(files))) {
		t.Errorf("the second import does not find the %d stored files unchanged: %s", len(files), r.stdout)
	}
	if got := storedFiles(t, storePath, want); len(got) != n {
		t.Errorf("after the second import the store holds %d files, want %d", len(got), n)
	}
	out := t.TempDir()
	c.ok(t, t.TempDir(), nil, "export", c.url(name), "--out", out, "--store", filepath.Join(t.TempDir(), "export.db"), "--quiet")
	for rel, data := range want {
		got, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(rel)))
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s on the remote: %q, %v", rel, got, err)
		}
	}
}

// importUntilKilled runs the import and kills it with SIGKILL at its
// first "stored N/M files locally" line; it returns N. An import that
// ends before fails the test.
func importUntilKilled(t *testing.T, c *cliRunner, args []string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.Dir = t.TempDir()
	cmd.Env = c.environ(nil)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stored := regexp.MustCompile(`^stored (\d+)/\d+ files locally$`)
	acked := -1
	var seen []string
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		seen = append(seen, sc.Text())
		if m := stored.FindStringSubmatch(sc.Text()); m != nil {
			acked, _ = strconv.Atoi(m[1])
			_ = cmd.Process.Kill()
			break
		}
	}
	_ = cmd.Wait()
	if acked < 0 {
		t.Fatalf("the import ended before reporting a stored batch:\n%s", strings.Join(seen, "\n"))
	}
	return acked
}

// storedFiles opens the replica at path and returns its files, checking
// that each has every chunk it names and the content of want.
func storedFiles(t *testing.T, path string, want map[string][]byte) []vault.File {
	t.Helper()
	ctx := t.Context()
	st, err := boltstore.Open(path, boltstore.Options{Options: store.Options{Name: "local"}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	v, err := vault.Open(ctx, st, vault.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	files, err := v.List(ctx, "", vault.ListOptions{Deleted: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f.LocalChunks != f.Chunks {
			t.Errorf("%s: metadata naming %d chunks, %d in the store", f.Meta.Path, f.Chunks, f.LocalChunks)
			continue
		}
		data, err := v.ReadMeta(ctx, f.Meta)
		if err != nil || !bytes.Equal(data, want[f.Meta.Path]) {
			t.Errorf("%s in the store: %q, %v", f.Meta.Path, data, err)
		}
	}
	return files
}
