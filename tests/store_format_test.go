package tests

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/livesync-go/livesync-go/engine/store/boltstore"
)

// newerFormatFile makes a store file recorded in a store format one
// newer than this build knows, as a later release would leave it.
func newerFormatFile(t *testing.T, path string) int {
	t.Helper()
	st, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	v := boltstore.FormatVersion() + 1
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("meta")).Put([]byte("format"), fmt.Append(nil, v))
	}); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestStoreFormatNewerRefused: the relay and the CLI refuse a file of a
// newer store format, leave it as it was, and say to upgrade, naming
// both formats.
func TestStoreFormatNewerRefused(t *testing.T) {
	dir := t.TempDir()
	data, replica := filepath.Join(dir, "data"), filepath.Join(dir, "replica.db")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, file string
		args       []string
	}{
		{"livesync-relay", filepath.Join(data, "vault.db"), []string{goBuildRelay(t), "--listen", "127.0.0.1:0", "--data-dir", data}},
		{"livesync", replica, []string{buildCLI(t), "status", "--store", replica}},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := newerFormatFile(t, c.file)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, c.args[0], c.args[1:]...)
			cmd.Env = []string{"HOME=" + dir, "LIVESYNC_RELAY_ADMIN_PASSWORD=pw"}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Run(); err == nil || ctx.Err() != nil {
				t.Fatalf("not refused (%v):\n%s", err, stderr.String())
			}
			msg := stderr.String()
			for _, want := range []string{fmt.Sprintf("store format %d", v), fmt.Sprintf("formats up to %d", v-1), "upgrade"} {
				if !strings.Contains(msg, want) {
					t.Errorf("the error does not say %q:\n%s", want, msg)
				}
			}
			if got, err := boltstore.ReadFormat(c.file, time.Second); err != nil || got != v {
				t.Errorf("the file's format is now %d (%v)", got, err)
			}
			if m, _ := filepath.Glob(c.file + ".bak-*"); len(m) != 0 {
				t.Errorf("copies made of a refused file: %v", m)
			}
			t.Logf("%s", strings.TrimSpace(msg))
		})
	}
}
