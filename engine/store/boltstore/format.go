//go:build !js && !wasip1

package boltstore

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/livesync-go/livesync-go/engine/store"
)

// formatKey is the key of the meta bucket that records the file's store
// format version, in decimal. A file written before versions were
// recorded has none and is format 1.
var formatKey = []byte("format")

// migration turns a file of format to-1 into format to. It runs in one
// write transaction, which also records the new version: a migration
// interrupted by a crash leaves the file in the old format, whole.
type migration struct {
	to   int
	name string
	fn   func(tx *bolt.Tx) error
}

// migrations are the format changes, oldest first: migrations[i] turns
// format i+1 into i+2. Format 1 is the layout of the five buckets as
// engine/store defines them.
var migrations []migration

// timeNow stamps the names of the copies made before a migration.
var timeNow = time.Now

// FormatVersion is the store format this build writes: a file of an
// older format is migrated when opened; a newer one is refused.
func FormatVersion() int { return 1 + len(migrations) }

// ErrNewerFormat means a file was written by a newer build, in a store
// format this one does not know. Opening it is refused, whole, rather
// than misread: upgrade to open it.
var ErrNewerFormat = errors.New("boltstore: the file's store format is newer than this build knows")

// FormatError is the error of a file whose store format is newer than
// this build knows; it wraps ErrNewerFormat.
type FormatError struct {
	Path    string
	Version int // the file's
	Known   int // the newest this build knows (FormatVersion)
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("boltstore: %s is in store format %d, but this build knows formats up to %d: it was written by a newer livesync-go; "+
		"upgrade to a release that knows format %d to open it (downgrading a data file is not supported; "+
		"to go back, restore a backup made by this version)", e.Path, e.Version, e.Known, e.Version)
}

func (e *FormatError) Unwrap() error { return ErrNewerFormat }

// fileFormat reads the format version a transaction sees: fresh is true
// for a file with no bucket at all (just created), stamped whether the
// version is recorded (otherwise the file predates versions: format 1).
func fileFormat(tx *bolt.Tx) (v int, fresh, stamped bool, err error) {
	fresh = true
	tx.ForEach(func([]byte, *bolt.Bucket) error { fresh = false; return nil })
	meta := tx.Bucket(bucketNames[store.BucketMeta])
	if meta == nil {
		return 1, fresh, false, nil
	}
	raw := meta.Get(formatKey)
	if raw == nil {
		return 1, fresh, false, nil
	}
	v, err = strconv.Atoi(string(raw))
	if err != nil || v < 1 {
		return 0, fresh, true, fmt.Errorf("boltstore: the recorded store format %q is not a version number (a damaged file?)", raw)
	}
	return v, fresh, true, nil
}

// prepare brings a file just opened to this build's format: a new file
// gets the buckets and the current version; a file without a version is
// stamped format 1; an older format is copied to a backup file next to
// it and then migrated, one transaction per step; a newer one is refused
// with a *FormatError.
func prepare(db *bolt.DB, path string, migrated func(Migration)) error {
	var v int
	var fresh, stamped, complete bool
	err := db.View(func(tx *bolt.Tx) (err error) {
		v, fresh, stamped, err = fileFormat(tx)
		complete = true
		for _, name := range bucketNames {
			complete = complete && tx.Bucket(name) != nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("%w (%s)", err, path)
	}
	known := FormatVersion()
	if fresh {
		v = known
	}
	if v > known {
		return &FormatError{Path: path, Version: v, Known: known}
	}
	var bak string
	if v < known {
		if bak, err = backupCopy(db, path, v); err != nil {
			return fmt.Errorf("boltstore: %s is in store format %d and must be migrated to %d, but the copy to keep first could not be written (the file is unchanged): %w", path, v, known, full(err))
		}
	}
	if !complete || !stamped {
		err := db.Update(func(tx *bolt.Tx) error {
			for _, name := range bucketNames {
				if _, err := tx.CreateBucketIfNotExists(name); err != nil {
					return err
				}
			}
			return tx.Bucket(bucketNames[store.BucketMeta]).Put(formatKey, []byte(strconv.Itoa(v)))
		})
		if err != nil {
			return fmt.Errorf("boltstore: init %s: %w", path, full(err))
		}
	}
	for _, m := range migrations {
		if m.to <= v {
			continue
		}
		err := db.Update(func(tx *bolt.Tx) error {
			if err := m.fn(tx); err != nil {
				return err
			}
			return tx.Bucket(bucketNames[store.BucketMeta]).Put(formatKey, []byte(strconv.Itoa(m.to)))
		})
		if err != nil {
			return fmt.Errorf("boltstore: migrating %s from store format %d to %d (%s) failed; the file stays in format %d: %w", path, m.to-1, m.to, m.name, m.to-1, full(err))
		}
	}
	if bak != "" && migrated != nil {
		migrated(Migration{Path: path, From: v, To: known, Backup: bak})
	}
	return nil
}

// Migration describes a file migrated to this build's store format when
// it was opened (Options.Migrated).
type Migration struct {
	Path     string
	From, To int
	// Backup is the consistent copy of the file as it was before,
	// <Path>.bak-v<From>-<time>; it is kept until removed by hand.
	Backup string
}

// BackupName is the name of the copy of the file at path kept before it
// is migrated from format v: <path>.bak-v<v>-<UTC time>.
func BackupName(path string, v int, at time.Time) string {
	return fmt.Sprintf("%s.bak-v%d-%s", path, v, at.UTC().Format("20060102T150405Z"))
}

// backupCopy writes a consistent copy of db (one read transaction's
// view) to a new bbolt file named BackupName, and returns its name. It
// never replaces a file: a name already taken gets a numbered suffix.
// The engine does no file I/O of its own, so the copy is made through
// bbolt: a new file whose buckets, keys, values and sequences are those
// of the read transaction, committed (and synced) in one transaction.
// A crash before that commit leaves an empty file under the name and the
// original unmigrated, so nothing is lost.
func backupCopy(db *bolt.DB, path string, v int) (string, error) {
	base := BackupName(path, v, timeNow())
	name := base
	for i := 2; ; i++ {
		taken, err := exists(name)
		if err != nil {
			return "", err
		}
		if !taken {
			break
		}
		name = fmt.Sprintf("%s-%d", base, i)
	}
	dst, err := bolt.Open(name, fs.FileMode(0o600), &bolt.Options{Timeout: time.Second})
	if err != nil {
		return "", err
	}
	err = db.View(func(src *bolt.Tx) error {
		return dst.Update(func(out *bolt.Tx) error {
			return src.ForEach(func(bn []byte, b *bolt.Bucket) error {
				nb, err := out.CreateBucket(bn)
				if err != nil {
					return err
				}
				return copyBucket(nb, b)
			})
		})
	})
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	return name, nil
}

// copyBucket copies every key, value and nested bucket of src into dst,
// and src's sequence.
func copyBucket(dst, src *bolt.Bucket) error {
	dst.FillPercent = 1 // keys arrive in order: pack the pages
	if err := dst.SetSequence(src.Sequence()); err != nil {
		return err
	}
	return src.ForEach(func(k, v []byte) error {
		if v != nil {
			return dst.Put(k, v)
		}
		nb, err := dst.CreateBucket(k)
		if err != nil {
			return err
		}
		return copyBucket(nb, src.Bucket(k))
	})
}

// exists reports whether name is taken, by opening it read-only as a
// bbolt file: any answer but "not found" counts as taken.
func exists(name string) (bool, error) {
	db, err := bolt.Open(name, 0o600, &bolt.Options{ReadOnly: true, Timeout: 10 * time.Millisecond})
	if err == nil {
		db.Close()
		return true, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return true, nil
}

// ReadFormat reports the store format recorded in the bbolt file at path
// (1 for a file that predates recorded versions) without changing it. It
// opens the file read-only, so it waits up to timeout (0: 5 seconds) for
// a process that has it open for writing.
func ReadFormat(path string, timeout time.Duration) (int, error) {
	db, err := openReadOnly(path, timeout)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var v int
	err = db.View(func(tx *bolt.Tx) (err error) {
		v, _, _, err = fileFormat(tx)
		return err
	})
	return v, err
}

func openReadOnly(path string, timeout time.Duration) (*bolt.DB, error) {
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	if taken, _ := exists(path); !taken {
		return nil, fmt.Errorf("boltstore: %s: %w", path, fs.ErrNotExist)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: timeout})
	if err != nil {
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	return db, nil
}
