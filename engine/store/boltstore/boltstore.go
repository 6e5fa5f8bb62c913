//go:build !js && !wasip1

package boltstore

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/livesync-go/livesync-go/engine/store"
)

// Options configures Open. The zero value means the defaults.
type Options struct {
	store.Options
	// Timeout bounds the wait for another process's lock on the file;
	// 0 means 5 seconds.
	Timeout time.Duration
	// Migrated, if set, is called after Open migrated the file from an
	// older store format (the copy kept of the file as it was is named
	// in the Migration), e.g. to log it.
	Migrated func(Migration)
}

// Validate reports whether the options are usable.
func (o Options) Validate() error {
	if o.Timeout < 0 {
		return errors.New("boltstore: Timeout is negative")
	}
	return o.Options.Validate()
}

var bucketNames = [store.NumBuckets][]byte{
	store.BucketDocs:   []byte("docs"),
	store.BucketSeqs:   []byte("seqs"),
	store.BucketLocal:  []byte("local"),
	store.BucketMeta:   []byte("meta"),
	store.BucketBodies: []byte("bodies"),
}

// Open opens or creates the store kept in the file at path.
func Open(path string, opts Options) (store.Store, error) {
	b, err := OpenBackend(path, opts)
	if err != nil {
		return nil, err
	}
	st, err := store.Open(b, opts.Options)
	if err != nil {
		b.Close()
		return nil, err
	}
	return st, nil
}

// OpenBackend opens or creates the bbolt file at path as a store.Backend,
// for a Store composed with store.Open (Open does that). Its write
// errors of a full file system or quota wrap store.ErrStorageFull. A new
// file records the store format this build writes (FormatVersion); an
// older file is migrated in place after a copy of it is kept (see
// BackupName); a file of a newer format is refused with a *FormatError.
func OpenBackend(path string, opts Options) (store.Backend, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	db, err := bolt.Open(path, fs.FileMode(0o600), &bolt.Options{Timeout: timeout})
	if err != nil {
		return nil, fmt.Errorf("boltstore: open %s: %w", path, full(err))
	}
	if err := prepare(db, path, opts.Migrated); err != nil {
		db.Close()
		return nil, err
	}
	return &backend{db: db, w: &committer{db: db}}, nil
}

// backend adapts a bbolt database to store.Backend. Its writes go
// through a committer, which lets concurrent Updates share a commit.
type backend struct {
	db *bolt.DB
	w  *committer
}

func (b *backend) View(fn func(store.Tx) error) error {
	return b.db.View(func(tx *bolt.Tx) error { return fn(boltTx{tx}) })
}

func (b *backend) Update(fn func(store.Tx) error) error {
	return full(b.w.update(func(tx *bolt.Tx) error { return fn(boltTx{tx}) }))
}

// full marks an error of a full file system (ENOSPC) or an exhausted quota
// (EDQUOT) with store.ErrStorageFull, so the store's callers can tell it
// apart from other storage failures. bbolt rolls the transaction back:
// nothing of it is in the file.
func full(err error) error {
	if err != nil && !errors.Is(err, store.ErrStorageFull) &&
		(errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)) {
		return fmt.Errorf("%w: %w", store.ErrStorageFull, err)
	}
	return err
}

func (b *backend) Close() error { return b.db.Close() }

type boltTx struct{ tx *bolt.Tx }

func (t boltTx) bucket(b store.Bucket) *bolt.Bucket { return t.tx.Bucket(bucketNames[b]) }

func (t boltTx) Get(b store.Bucket, key []byte) []byte { return t.bucket(b).Get(key) }

func (t boltTx) Put(b store.Bucket, key, value []byte) error { return t.bucket(b).Put(key, value) }

func (t boltTx) Delete(b store.Bucket, key []byte) error { return t.bucket(b).Delete(key) }

func (t boltTx) Ascend(b store.Bucket, from []byte, fn func(k, v []byte) bool) error {
	c := t.bucket(b).Cursor()
	var k, v []byte
	if len(from) == 0 {
		k, v = c.First()
	} else {
		k, v = c.Seek(from)
	}
	for ; k != nil; k, v = c.Next() {
		if !fn(k, v) {
			break
		}
	}
	return nil
}
