package main

import (
	"path/filepath"
	"testing"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/adapters/minio"
)

// vault_name: the folder the replica serves; for a temporary replica, the
// remote's database name or bucket prefix; never empty.
func TestVaultNameFor(t *testing.T) {
	root := t.TempDir()
	couch := remoteSpec{kind: "couchdb", id: "https://couch.example/base/notes-db",
		couch: couchdb.Config{URL: "https://couch.example/base", Database: "notes-db"}}
	bucket := func(prefix string) remoteSpec {
		return remoteSpec{kind: "s3", s3: minio.Location{Config: minio.Config{Bucket: "vaults", Prefix: prefix}}}
	}
	for _, tc := range []struct {
		name string
		r    *replica
		spec remoteSpec
		want string
	}{
		{"store in the vault's .livesync", &replica{path: filepath.Join(root, "notes", ".livesync", "store.db")}, couch, "notes"},
		{"store elsewhere", &replica{path: filepath.Join(root, "replicas", "work.db")}, couch, "replicas"},
		{"relative default store", &replica{path: defaultStore}, couch, filepath.Base(mustAbs(t, "."))},
		{"temporary replica, CouchDB", &replica{path: filepath.Join(root, "tmp", "store.db"), temp: root}, couch, "notes-db"},
		{"temporary replica, bucket prefix", &replica{temp: root}, bucket("team/my-vault/"), "team/my-vault"},
		{"temporary replica, bucket root", &replica{temp: root}, bucket(""), "vaults"},
		{"store at the root", &replica{path: "/store.db"}, couch, "notes-db"},
		{"nothing names it", &replica{temp: root}, remoteSpec{kind: "couchdb", id: "http://h", couch: couchdb.Config{URL: "http://h"}}, fallbackVaultName},
	} {
		if got := vaultNameFor(tc.r, tc.spec); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	if got := deviceInfoFor("laptop", &replica{path: filepath.Join(root, "notes", ".livesync", "store.db")}, couch); got.VaultName != "notes" || got.DeviceName != "laptop" {
		t.Errorf("deviceInfoFor = %+v", got)
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
