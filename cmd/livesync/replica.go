package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/store/boltstore"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// defaultStore is the local replica when neither --store nor the
// configuration names one.
const defaultStore = "./.livesync/store.db"

// replica is the local replica: a bbolt store holding the vault's
// documents in their local (plaintext) form, and the vault over it
// (which keeps the vault's settings, what it knows of each remote and
// this device's node id in the replica).
type replica struct {
	path string
	st   store.Store // wrapped: its errors are *localError
	temp string      // a temporary folder removed by Close, if any
	v    *vault.Vault
}

// openReplica opens the local replica at path. Unless create is set, a
// missing file is an error that says to pull first.
func (e *cliEnv) openReplica(path string, create bool) (*replica, error) {
	if _, err := os.Stat(path); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, &localError{path, err}
		}
		if !create {
			return nil, fmt.Errorf("no local replica at %s: pull from a remote first, or name one with --store", path)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, &localError{path, err}
		}
	}
	st, err := boltstore.Open(path, boltstore.Options{Options: store.Options{Name: "local"}, Timeout: time.Second})
	if err != nil {
		return nil, &localError{path, err}
	}
	r := &replica{path: path}
	r.st = &localStore{Store: st, path: path}
	if e.wrapStore != nil {
		r.st = &localStore{Store: e.wrapStore(st), path: path}
	}
	v, err := vault.Open(e.ctx, r.st, vault.Options{Now: e.now, Log: e.log})
	if err != nil {
		r.Close()
		var le *localError
		var ee *engine.Error
		if !errors.As(err, &le) && errors.As(err, &ee) {
			err = &localError{path, ee.Err}
		}
		return nil, err
	}
	r.v = v
	return r, nil
}

// openTempReplica opens a replica in a new temporary folder, removed by
// Close.
func (e *cliEnv) openTempReplica() (*replica, error) {
	dir, err := os.MkdirTemp("", "livesync-")
	if err != nil {
		return nil, &localError{os.TempDir(), err}
	}
	r, err := e.openReplica(filepath.Join(dir, "store.db"), true)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	r.temp = dir
	return r, nil
}

// Close closes the store (and removes a temporary replica).
func (r *replica) Close() error {
	if r.v != nil {
		r.v.Close()
	}
	err := r.st.Close()
	if r.temp != "" {
		os.RemoveAll(r.temp)
	}
	return err
}

// nodeIDIfAny returns this device's node id, "" if the replica has none
// yet (it creates nothing).
func (r *replica) nodeIDIfAny(ctx context.Context) (string, error) {
	return vault.NodeIDIfAny(ctx, r.st)
}

// isEmpty reports whether the replica holds no document at all (deleted
// ones included): nothing of it could be merged into a remote.
func (r *replica) isEmpty(ctx context.Context) (bool, error) { return r.v.IsEmpty(ctx) }

// newVaultSettings returns the settings of a new vault, on a journal
// bucket or not: vault.DefaultSettings changed by c.
func newVaultSettings(c vaultConfig, journal bool) livesync.Settings {
	s := vault.DefaultSettings(journal)
	if c.E2EE != nil {
		s.Encrypt = *c.E2EE
	}
	if c.ObfuscatePaths != nil {
		s.PathObfuscation = *c.ObfuscatePaths
	}
	if c.CustomChunkSize != nil {
		s.CustomChunkSize = *c.CustomChunkSize
	}
	if c.CaseSensitive != nil {
		s.CaseSensitive = *c.CaseSensitive
	}
	return s
}

// localStore marks every storage error of the local replica as a
// *localError, so that a full disk is told apart from a remote failure.
// Not-found answers and cancellations pass unchanged.
type localStore struct {
	store.Store
	path string
}

func (l *localStore) wrap(err error) error {
	if err == nil || errors.Is(err, engine.ErrNotFound) || errors.Is(err, context.Canceled) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, store.ErrConflict) {
		return err
	}
	var le *localError
	if errors.As(err, &le) {
		return err
	}
	return &localError{l.path, err}
}

func (l *localStore) Info(ctx context.Context) (engine.EndpointInfo, error) {
	i, err := l.Store.Info(ctx)
	return i, l.wrap(err)
}

func (l *localStore) Changes(ctx context.Context, req engine.ChangesRequest) (engine.ChangesPage, error) {
	p, err := l.Store.Changes(ctx, req)
	return p, l.wrap(err)
}

func (l *localStore) RevsDiff(ctx context.Context, revs map[string][]string) (map[string][]string, error) {
	m, err := l.Store.RevsDiff(ctx, revs)
	return m, l.wrap(err)
}

func (l *localStore) BulkGet(ctx context.Context, revs []engine.DocRev) ([]json.RawMessage, error) {
	d, err := l.Store.BulkGet(ctx, revs)
	return d, l.wrap(err)
}

func (l *localStore) BulkDocs(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	r, err := l.Store.BulkDocs(ctx, docs)
	return r, l.wrap(err)
}

func (l *localStore) GetLocal(ctx context.Context, id string) (json.RawMessage, error) {
	d, err := l.Store.GetLocal(ctx, id)
	return d, l.wrap(err)
}

func (l *localStore) PutLocal(ctx context.Context, id string, doc json.RawMessage) error {
	return l.wrap(l.Store.PutLocal(ctx, id, doc))
}

func (l *localStore) GetChunks(ctx context.Context, ids []engine.ChunkID) (map[engine.ChunkID]engine.Chunk, error) {
	m, err := l.Store.GetChunks(ctx, ids)
	return m, l.wrap(err)
}

func (l *localStore) PutChunks(ctx context.Context, chunks []engine.Chunk) error {
	return l.wrap(l.Store.PutChunks(ctx, chunks))
}

func (l *localStore) Get(ctx context.Context, id string, opts store.GetOptions) (json.RawMessage, error) {
	d, err := l.Store.Get(ctx, id, opts)
	return d, l.wrap(err)
}

func (l *localStore) Put(ctx context.Context, doc json.RawMessage) (string, error) {
	rev, err := l.Store.Put(ctx, doc)
	return rev, l.wrap(err)
}

func (l *localStore) AllDocs(ctx context.Context, opts store.AllDocsOptions) ([]store.DocInfo, error) {
	d, err := l.Store.AllDocs(ctx, opts)
	return d, l.wrap(err)
}

func (l *localStore) Close() error { return l.wrap(l.Store.Close()) }
