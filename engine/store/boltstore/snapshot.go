//go:build !js && !wasip1

package boltstore

import (
	"errors"
	"io"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/livesync-go/livesync-go/engine/store"
)

// ErrNotBolt means Snapshot was given a store that is not kept in a
// bbolt file by this package.
var ErrNotBolt = errors.New("boltstore: the store is not a bbolt file of this package")

// SnapshotInfo describes a copy Snapshot or SnapshotFile wrote.
type SnapshotInfo struct {
	Size   int64 // bytes written: the file's size at the copied state
	Format int   // the store format recorded in the copy
}

// Snapshot writes to w a consistent copy of the bbolt file behind st (a
// Store from Open, or store.Open over OpenBackend's backend): one read
// transaction's WriteTo, a valid bbolt file as of one committed state,
// while writes go on. The read transaction lasts as long as w takes, and
// a write that must grow the file's memory map waits for it to end, so
// give a local file (copy that onward), not a slow network peer.
func Snapshot(st store.Store, w io.Writer) (SnapshotInfo, error) {
	b, ok := store.BackendOf(st).(*backend)
	if !ok {
		return SnapshotInfo{}, ErrNotBolt
	}
	return snapshot(b.db, w)
}

// SnapshotFile writes to w a copy of the bbolt file at path, which no
// process may have open for writing: it opens the file read-only,
// waiting up to timeout (0: 5 seconds) for a writer's lock, and copies
// it as Snapshot does, without migrating it.
func SnapshotFile(path string, w io.Writer, timeout time.Duration) (SnapshotInfo, error) {
	db, err := openReadOnly(path, timeout)
	if err != nil {
		return SnapshotInfo{}, err
	}
	defer db.Close()
	return snapshot(db, w)
}

func snapshot(db *bolt.DB, w io.Writer) (info SnapshotInfo, err error) {
	err = db.View(func(tx *bolt.Tx) error {
		if info.Format, _, _, err = fileFormat(tx); err != nil {
			return err
		}
		info.Size, err = tx.WriteTo(w)
		return err
	})
	return info, err
}
