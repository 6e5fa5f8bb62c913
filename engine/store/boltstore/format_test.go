//go:build !js && !wasip1

package boltstore

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
)

// format1Fixture is a store file in format 1 as written before versions
// were recorded (no format key), committed so that every later build is
// tested against a file the earlier code made. Regenerate it with
// go test -run TestFormat1Fixture -update-format1 (only if the helper
// below changes: the file must stay what format-1 code wrote).
const format1Fixture = "testdata/format1.db"

var updateFormat1 = flag.Bool("update-format1", false, "rewrite "+format1Fixture)

// writeFormat1File writes a store file at path as the code before
// recorded format versions did: the five buckets, no format key, and
// through the store: 20 documents, 5 of them edited twice, one deleted,
// 3 chunks, a _local checkpoint and a revs limit of 50.
func writeFormat1File(path string) error {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range bucketNames {
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return err
	}
	st, err := store.Open(&backend{db: db, w: &committer{db: db}}, store.Options{Name: "fixture"})
	if err != nil {
		db.Close()
		return err
	}
	defer st.Close()
	return fillFormat1(context.Background(), st)
}

func fillFormat1(ctx context.Context, st store.Store) error {
	for i := range 20 {
		rev, err := st.Put(ctx, fmt.Appendf(nil, `{"_id":"note-%02d","path":"n%d.md","v":%d}`, i, i, i))
		if err != nil {
			return err
		}
		if i%4 == 0 {
			if _, err := st.Put(ctx, fmt.Appendf(nil, `{"_id":"note-%02d","_rev":%q,"path":"n%d.md","v":%d}`, i, rev, i, i+100)); err != nil {
				return err
			}
		}
		if i == 19 {
			if _, err := st.Put(ctx, fmt.Appendf(nil, `{"_id":"note-19","_rev":%q,"_deleted":true}`, rev)); err != nil {
				return err
			}
		}
	}
	chunks := []engine.Chunk{{ID: "h:one", Data: "first chunk"}, {ID: "h:two", Data: "second chunk"}, {ID: "h:+three", Data: "c2VjcmV0"}}
	if err := st.PutChunks(ctx, chunks); err != nil {
		return err
	}
	if err := st.PutLocal(ctx, "checkpoint", []byte(`{"last_seq":"7"}`)); err != nil {
		return err
	}
	return st.SetRevsLimit(ctx, 50)
}

// checkFormat1Data checks that st holds what writeFormat1File wrote,
// and extra more documents.
func checkFormat1Data(t *testing.T, st store.Store, extra int) {
	t.Helper()
	ctx := t.Context()
	for i := range 20 {
		id := fmt.Sprintf("note-%02d", i)
		d, err := st.Get(ctx, id, store.GetOptions{})
		if i == 19 {
			if !errors.Is(err, engine.ErrNotFound) {
				t.Errorf("%s: deleted, got %s, %v", id, d, err)
			}
			continue
		}
		want := i
		if i%4 == 0 {
			want = i + 100
		}
		if err != nil || !strings.Contains(string(d), fmt.Sprintf(`"v":%d`, want)) {
			t.Errorf("%s: %s, %v (want v %d)", id, d, err, want)
		}
	}
	ch, err := st.GetChunks(ctx, []string{"h:one", "h:two", "h:+three"})
	if err != nil || len(ch) != 3 || ch["h:+three"].Data != "c2VjcmV0" {
		t.Errorf("chunks: %v, %v", ch, err)
	}
	if l, err := st.GetLocal(ctx, "checkpoint"); err != nil || !strings.Contains(string(l), `"7"`) {
		t.Errorf("local: %s, %v", l, err)
	}
	if n, err := st.RevsLimit(ctx); err != nil || n != 50 {
		t.Errorf("revs limit %d, %v", n, err)
	}
	info, err := st.Info(ctx)
	if err != nil || info.DocCount != int64(22+extra) { // 19 notes and 3 chunks
		t.Errorf("info %+v, %v", info, err)
	}
}

// dump lists every bucket's keys and values of the bbolt file at path,
// opened read-only: the file's content, whatever its page layout.
func dump(t *testing.T, path string) string {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var b strings.Builder
	err = db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, bk *bolt.Bucket) error {
			return bk.ForEach(func(k, v []byte) error {
				fmt.Fprintf(&b, "%s %q %q\n", name, k, v)
				return nil
			})
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// rawFormat returns the format key's value in the file, nil if absent.
func rawFormat(t *testing.T, path string) []byte {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v []byte
	db.View(func(tx *bolt.Tx) error {
		if m := tx.Bucket(bucketNames[store.BucketMeta]); m != nil && m.Get(formatKey) != nil {
			v = append([]byte{}, m.Get(formatKey)...)
		}
		return nil
	})
	return v
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestFormat1Fixture checks the helper that made the committed fixture:
// it writes the buckets without a format key and the data
// checkFormat1Data expects, and the committed file has the same content.
func TestFormat1Fixture(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f1.db")
	if err := writeFormat1File(path); err != nil {
		t.Fatal(err)
	}
	if v := rawFormat(t, path); v != nil {
		t.Fatalf("a format-1 file records no format; got %q", v)
	}
	got := dump(t, path)
	for _, name := range bucketNames {
		if !strings.Contains(got, string(name)+" ") && string(name) != "bodies" {
			t.Errorf("bucket %s empty or missing", name)
		}
	}
	if *updateFormat1 {
		copyFile(t, path, format1Fixture)
	}
	if committed := dump(t, format1Fixture); committed != got {
		t.Fatalf("%s differs from what writeFormat1File writes:\n%s\nwant:\n%s", format1Fixture, committed, got)
	}
	// Read through a backend that neither stamps nor migrates.
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(&backend{db: db, w: &committer{db: db}}, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	checkFormat1Data(t, st, 0)
}

// withMigration registers a test migration to format 2 for the test: it
// adds a bucket "v2" holding the number of document ids it found (notes
// and chunks, the deleted one included), so that
// the test can tell that it ran, once, on the whole file.
func withMigration(t *testing.T, fn func(*bolt.Tx) error) {
	t.Helper()
	saved := migrations
	t.Cleanup(func() { migrations = saved })
	if fn == nil {
		fn = func(tx *bolt.Tx) error {
			b, err := tx.CreateBucket([]byte("v2"))
			if err != nil {
				return err
			}
			n := tx.Bucket(bucketNames[store.BucketDocs]).Stats().KeyN
			return b.Put([]byte("docs"), fmt.Append(nil, n))
		}
	}
	migrations = append(migrations[:len(migrations):len(migrations)], migration{to: len(saved) + 2, name: "test: count the documents", fn: fn})
}

func fixedNow(t *testing.T) time.Time {
	at := time.Date(2026, 12, 3, 10, 4, 5, 0, time.UTC)
	saved := timeNow
	t.Cleanup(func() { timeNow = saved })
	timeNow = func() time.Time { return at }
	return at
}

func fixtureCopy(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "vault.db")
	copyFile(t, format1Fixture, path)
	return path
}

func backups(t *testing.T, path string) []string {
	t.Helper()
	m, err := filepath.Glob(path + ".bak-*")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestFormat1Stamped: with no migration registered (format 1 is current)
// the fixture is stamped format 1, without a backup copy, data intact.
func TestFormat1Stamped(t *testing.T) {
	if FormatVersion() != 1 {
		t.Skip("this build has migrations: TestMigrateFormat1 covers the fixture")
	}
	path := fixtureCopy(t)
	st, err := Open(path, Options{Migrated: func(m Migration) { t.Errorf("migrated: %+v", m) }})
	if err != nil {
		t.Fatal(err)
	}
	checkFormat1Data(t, st, 0)
	st.Close()
	if v := rawFormat(t, path); string(v) != "1" {
		t.Fatalf("format key %q, want 1", v)
	}
	if b := backups(t, path); len(b) != 0 {
		t.Fatalf("backups made: %v", b)
	}
}

// TestMigrateFormat1 opens the committed format-1 file with a registered
// migration to format 2: the migration runs once, after a copy of the
// file as it was is kept under <file>.bak-v1-<time>, and the data is
// intact in both.
func TestMigrateFormat1(t *testing.T) {
	withMigration(t, nil)
	at := fixedNow(t)
	path := fixtureCopy(t)
	before := dump(t, path)
	var got []Migration
	st, err := Open(path, Options{Migrated: func(m Migration) { got = append(got, m) }})
	if err != nil {
		t.Fatal(err)
	}
	checkFormat1Data(t, st, 0)
	if _, err := st.Put(t.Context(), []byte(`{"_id":"after"}`)); err != nil {
		t.Fatal(err)
	}
	st.Close()

	bak := BackupName(path, 1, at)
	if want := path + ".bak-v1-20261203T100405Z"; bak != want {
		t.Fatalf("backup name %s, want %s", bak, want)
	}
	if len(got) != 1 || got[0] != (Migration{Path: path, From: 1, To: 2, Backup: bak}) {
		t.Fatalf("Migrated calls %+v", got)
	}
	if b := backups(t, path); len(b) != 1 || b[0] != bak {
		t.Fatalf("backups %v, want [%s]", b, bak)
	}
	if d := dump(t, bak); d != before {
		t.Fatalf("the backup is not the file as it was:\n%s", d)
	}
	if v := rawFormat(t, path); string(v) != "2" {
		t.Fatalf("format key %q after the migration, want 2", v)
	}
	if v, err := ReadFormat(path, 0); err != nil || v != 2 {
		t.Fatalf("ReadFormat %d, %v", v, err)
	}
	if !strings.Contains(dump(t, path), `v2 "docs" "23"`) {
		t.Fatalf("the migration's bucket is missing:\n%s", dump(t, path))
	}

	// Reopened: nothing to migrate, no second copy; the data is there.
	st, err = Open(path, Options{Migrated: func(m Migration) { t.Errorf("migrated again: %+v", m) }})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	checkFormat1Data(t, st, 1)
	if b := backups(t, path); len(b) != 1 {
		t.Fatalf("backups after a reopen: %v", b)
	}
	// The backup itself opens as the old data (and is migrated in turn).
	stb, err := Open(bak, Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkFormat1Data(t, stb, 0)
	stb.Close()
}

// TestMigrationFails: a migration that fails leaves the file in the old
// format with its data, the copy made before it kept, and the open
// refused with an error naming both formats.
func TestMigrationFails(t *testing.T) {
	withMigration(t, func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucket([]byte("half")); err != nil {
			return err
		}
		return errors.New("disk on fire")
	})
	path := fixtureCopy(t)
	_, err := Open(path, Options{})
	if err == nil || !strings.Contains(err.Error(), "from store format 1 to 2") || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("open: %v", err)
	}
	if d := dump(t, path); strings.Contains(d, "half") {
		t.Fatal("the failed migration's writes are in the file")
	}
	if v, err := ReadFormat(path, 0); err != nil || v != 1 {
		t.Fatalf("format after the failure %d, %v", v, err)
	}
	if b := backups(t, path); len(b) != 1 {
		t.Fatalf("backups %v", b)
	}
	migrations = migrations[:len(migrations)-1]
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	checkFormat1Data(t, st, 0)
}

// stamp records format v in the file at path, as a newer build would.
func stamp(t *testing.T, path string, v string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketNames[store.BucketMeta]).Put(formatKey, []byte(v))
	}); err != nil {
		t.Fatal(err)
	}
}

// TestNewerFormatRefused: a file of a format newer than the build knows
// is refused, untouched, with an error naming both versions.
func TestNewerFormatRefused(t *testing.T) {
	path := fixtureCopy(t)
	stamp(t, path, "99")
	before := dump(t, path)
	_, err := Open(path, Options{})
	var fe *FormatError
	if !errors.Is(err, ErrNewerFormat) || !errors.As(err, &fe) || fe.Version != 99 || fe.Known != FormatVersion() {
		t.Fatalf("open: %v", err)
	}
	msg := err.Error()
	for _, want := range []string{"format 99", fmt.Sprintf("up to %d", FormatVersion()), "upgrade", path} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error %q does not say %q", msg, want)
		}
	}
	if dump(t, path) != before || len(backups(t, path)) != 0 {
		t.Fatal("a refused file was changed")
	}
	// The refusal does not keep the file locked.
	if v, err := ReadFormat(path, time.Second); err != nil || v != 99 {
		t.Fatalf("ReadFormat %d, %v", v, err)
	}

	stamp(t, path, "x1")
	if _, err := Open(path, Options{}); err == nil || !strings.Contains(err.Error(), "not a version number") {
		t.Fatalf("open with a garbled format: %v", err)
	}
}

// TestNewFileStamped: a new file records the current format at creation.
func TestNewFileStamped(t *testing.T) {
	withMigration(t, nil)
	path := filepath.Join(t.TempDir(), "new.db")
	st, err := Open(path, Options{Migrated: func(m Migration) { t.Errorf("a new file migrated: %+v", m) }})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if v := rawFormat(t, path); string(v) != "2" {
		t.Fatalf("format key %q, want 2", v)
	}
	if strings.Contains(dump(t, path), "v2 ") {
		t.Fatal("a migration ran on a new file")
	}
}
