package main

import (
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/store/boltstore"
)

// dataFolder makes a stopped relay's data folder: a database with n
// documents, the admin and uuid files, a peer book below a folder, and
// what a backup leaves out (the lock, a temporary file, a format
// upgrade's copy).
func dataFolder(t *testing.T, n int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(filepath.Join(dir, "p2p", "vault", "g"), 0o700); err != nil {
		t.Fatal(err)
	}
	st, err := boltstore.Open(filepath.Join(dir, "vault.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := st.Put(t.Context(), fmt.Appendf(nil, `{"_id":"doc-%04d","v":%d}`, i, i)); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	for name, body := range map[string]string{
		usersFile: `{"version":1}`, serverFile: `{"uuid":"x"}`, "p2p/vault/g/p2p-peers.json": `{}`,
		lockFile: "", ".users.json.123": "partial", "vault.db.bak-v1-20260101T000000Z": "old", "p2p/vault/g/p2p-peers.json.lock": "",
	} {
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(name)), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func offlineArchive(t *testing.T, dir string) []byte {
	t.Helper()
	var buf bytes.Buffer
	m, err := backupOffline(dir, &buf, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range m.Files {
		got = append(got, f.Path+":"+f.Kind)
	}
	if want := "p2p/vault/g/p2p-peers.json:file server.json:file users.json:file vault.db:bbolt"; strings.Join(got, " ") != want {
		t.Fatalf("files %v, want %s", got, want)
	}
	return buf.Bytes()
}

func restoreFrom(t *testing.T, archive []byte, target string, force bool) (restoreResult, error) {
	t.Helper()
	in := filepath.Join(t.TempDir(), "backup.tar")
	if err := os.WriteFile(in, archive, 0o600); err != nil {
		t.Fatal(err)
	}
	return restore(context.Background(), restoreFlags{in: in, dataDir: target, force: force}, io.Discard)
}

func checkDocs(t *testing.T, dbPath string, n int) {
	t.Helper()
	st, err := boltstore.Open(dbPath, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i := range n {
		if _, err := st.Get(t.Context(), fmt.Sprintf("doc-%04d", i), store.GetOptions{}); err != nil {
			t.Fatalf("doc-%04d: %v", i, err)
		}
	}
}

// TestBackupOfflineRestore: an offline backup restores into a new folder
// with the same files and documents, and into a non-empty one only with
// --force, which keeps the old folder aside.
func TestBackupOfflineRestore(t *testing.T) {
	dir := dataFolder(t, 50)
	archive := offlineArchive(t, dir)
	target := filepath.Join(t.TempDir(), "restored")
	res, err := restoreFrom(t, archive, target, false)
	if err != nil {
		t.Fatal(err)
	}
	if res.aside != "" {
		t.Fatalf("aside %q for a new folder", res.aside)
	}
	checkDocs(t, filepath.Join(target, "vault.db"), 50)
	for _, name := range []string{usersFile, serverFile, "p2p/vault/g/p2p-peers.json"} {
		a, _ := os.ReadFile(filepath.Join(dir, name))
		b, err := os.ReadFile(filepath.Join(target, name))
		if err != nil || !bytes.Equal(a, b) {
			t.Fatalf("%s: %q vs %q, %v", name, a, b, err)
		}
	}
	for _, name := range []string{lockFile, ".users.json.123", "vault.db.bak-v1-20260101T000000Z"} {
		if _, err := os.Stat(filepath.Join(target, name)); err == nil {
			t.Errorf("%s restored", name)
		}
	}

	_, err = restoreFrom(t, archive, target, false)
	if err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("restore into a non-empty folder: %v", err)
	}
	res, err = restoreFrom(t, archive, target, true)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.aside, target+".before-restore-") {
		t.Fatalf("aside %q", res.aside)
	}
	checkDocs(t, filepath.Join(res.aside, "vault.db"), 50)
	checkDocs(t, filepath.Join(target, "vault.db"), 50)

	// An empty folder (a lock file at most) is restored into.
	empty := filepath.Join(t.TempDir(), "empty")
	os.MkdirAll(empty, 0o700)
	os.WriteFile(filepath.Join(empty, lockFile), nil, 0o600)
	if _, err := restoreFrom(t, archive, empty, false); err != nil {
		t.Fatal(err)
	}
}

// TestRestoreRefusesDamage: a truncated or altered archive, or one that
// is not a backup, is refused with nothing written: the target stays
// absent (or unchanged) and no temporary folder is left.
func TestRestoreRefusesDamage(t *testing.T) {
	archive := offlineArchive(t, dataFolder(t, 300))
	flip := func(at int) []byte {
		b := bytes.Clone(archive)
		b[at] ^= 0x20
		return b
	}
	dbAt := bytes.Index(archive, []byte("data/vault.db")) + 2048 // inside the database's content
	manifestAt := bytes.LastIndex(archive, []byte(`"sha256"`)) + 12
	cases := map[string][]byte{
		"empty":              {},
		"not a tar":          []byte("hello, this is not an archive at all"),
		"half":               archive[:len(archive)/2],
		"no manifest":        archive[:bytes.LastIndex(archive, []byte(backupManifestName))-200],
		"cut in manifest":    archive[:manifestAt],
		"database bit flip":  flip(dbAt),
		"manifest bit flip":  flip(manifestAt),
		"end cut off":        archive[:len(archive)-1025-512],
		"header not backup":  bytes.Replace(bytes.Clone(archive), []byte(backupKind), []byte("something-else-xyz"), 1),
		"newer archive kind": bytes.Replace(bytes.Clone(archive), []byte(`"version": 1`), []byte(`"version": 9`), 1),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			parent := t.TempDir()
			target := filepath.Join(parent, "restored")
			_, err := restoreFrom(t, b, target, false)
			if !errors.Is(err, errBadBackup) {
				t.Fatalf("restore: %v", err)
			}
			left, _ := os.ReadDir(parent)
			if len(left) != 0 {
				t.Fatalf("left behind: %v", left)
			}
		})
	}
	// A non-empty target with --force is left as it was.
	target := filepath.Join(t.TempDir(), "kept")
	os.MkdirAll(target, 0o700)
	os.WriteFile(filepath.Join(target, "mine.txt"), []byte("mine"), 0o600)
	if _, err := restoreFrom(t, archive[:len(archive)/3], target, true); !errors.Is(err, errBadBackup) {
		t.Fatalf("restore: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(target, "mine.txt")); string(b) != "mine" {
		t.Fatal("the target was changed by a refused restore")
	}
	if m, _ := filepath.Glob(target + "*"); len(m) != 1 {
		t.Fatalf("left behind: %v", m)
	}
}

// TestRestoreRefusesNewerStoreFormat: a backup whose database is in a
// newer store format than this build knows is not restored.
func TestRestoreRefusesNewerStoreFormat(t *testing.T) {
	dir := dataFolder(t, 3)
	stampFormat(t, filepath.Join(dir, "vault.db"), "7")
	var buf bytes.Buffer
	if _, err := backupOffline(dir, &buf, time.Now()); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "restored")
	_, err := restoreFrom(t, buf.Bytes(), target, false)
	if err == nil || !strings.Contains(err.Error(), "store format 7") || !strings.Contains(err.Error(), "downgrading is not supported") {
		t.Fatalf("restore: %v", err)
	}
	if _, err := os.Stat(target); err == nil {
		t.Fatal("the target was created")
	}
}

// stampFormat records a store format in a database file, as a newer
// build would have.
func stampFormat(t *testing.T, path, v string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte("meta")).Put([]byte("format"), []byte(v)) }); err != nil {
		t.Fatal(err)
	}
}

// TestRelayRefusesNewerStoreFormat: the relay does not start on a data
// folder holding a database of a newer store format, and says why.
func TestRelayRefusesNewerStoreFormat(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	os.MkdirAll(dir, 0o700)
	st, err := boltstore.Open(filepath.Join(dir, "vault.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	stampFormat(t, filepath.Join(dir, "vault.db"), "42")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out syncBuffer
	code := run(ctx, []string{"--listen", "127.0.0.1:0", "--data-dir", dir}, envOf(nil), &out, nil)
	msg := out.String()
	if code != exitFailure || !strings.Contains(msg, "store format 42") || !strings.Contains(msg, "upgrade") ||
		!strings.Contains(msg, fmt.Sprintf("formats up to %d", boltstore.FormatVersion())) {
		t.Fatalf("exit %d:\n%s", code, msg)
	}
	t.Logf("%s", msg)
}

// TestBackupOnline backs a running relay up through its endpoint, as the
// CLI does, restores it and serves the copy; the endpoint is for admins
// only, and an offline backup of the running relay's folder is refused.
func TestBackupOnline(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	rn := start(t, []string{"--data-dir", dir}, nil)
	user, pass := rn.credentials()
	rn.user, rn.pass = user, pass
	rn.do("PUT", "/vault", user, pass, nil) // 201, or 412 when the relay made it at start
	for i := range 20 {
		rn.admin("PUT", fmt.Sprintf("/vault/doc-%04d", i), map[string]any{"v": i}, 201)
	}
	if code, _ := rn.do("GET", backupRoute, "", "", nil); code != 401 {
		t.Fatalf("anonymous backup: %d", code)
	}
	if code, _ := rn.do("GET", backupRoute, user, "wrong", nil); code != 401 {
		t.Fatalf("wrong password: %d", code)
	}
	out := filepath.Join(t.TempDir(), "b.tar")
	var stderr bytes.Buffer
	env := envOf(map[string]string{envAdminPassword: pass})
	if code := run(context.Background(), []string{"backup", "--out", out, "--url", rn.url, "--user", user}, env, &stderr, nil); code != 0 {
		t.Fatalf("backup: %d %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "vault (format 1)") {
		t.Fatalf("backup said: %s", stderr.String())
	}
	stderr.Reset()
	if code := run(context.Background(), []string{"backup", "--out", out, "--url", rn.url}, env, &stderr, nil); code != exitUsage || !strings.Contains(stderr.String(), "exists") {
		t.Fatalf("backup over an existing file: %s", stderr.String())
	}
	stderr.Reset()
	if code := run(context.Background(), []string{"backup", "--out", out + "2", "--data-dir", dir}, env, &stderr, nil); code != exitFailure || !strings.Contains(stderr.String(), "--url") {
		t.Fatalf("offline backup of a running relay: %d %s", code, stderr.String())
	}
	stderr.Reset()
	target := filepath.Join(t.TempDir(), "restored")
	if code := run(context.Background(), []string{"restore", "--in", out, "--data-dir", dir}, env, &stderr, nil); code != exitFailure || !strings.Contains(stderr.String(), "running") {
		t.Fatalf("restore into a running relay's folder: %d %s", code, stderr.String())
	}
	if code := run(context.Background(), []string{"restore", "--in", out, "--data-dir", target}, env, &stderr, nil); code != 0 {
		t.Fatalf("restore: %s", stderr.String())
	}
	rn.stop()
	rn2 := start(t, []string{"--data-dir", target}, map[string]string{})
	rn2.user, rn2.pass = user, pass // the restored users.json
	for i := range 20 {
		rn2.admin("GET", fmt.Sprintf("/vault/doc-%04d", i), nil, 200)
	}
}

// TestBackupClientCAFile: --ca-file trusts the given certificate and no
// other.
func TestBackupClientCAFile(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600)
	c, err := backupClient(ca)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if c, _ := backupClient(""); c != http.DefaultClient {
		t.Fatal("no --ca-file: not the default client")
	}
	if _, err := http.DefaultClient.Get(srv.URL); err == nil {
		t.Fatal("the default client trusted the test certificate")
	}
	os.WriteFile(ca, []byte("nothing"), 0o600)
	if _, err := backupClient(ca); err == nil {
		t.Fatal("a file without a certificate was accepted")
	}
}
