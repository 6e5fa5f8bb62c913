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
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/store/boltstore"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// defaultStore is the local replica when neither --store nor the
// configuration names one.
const defaultStore = "./.livesync/store.db"

// vaultLocalID is the _local document (not replicated) in which the CLI
// keeps the vault's settings and what it knows of each remote.
const vaultLocalID = "livesync-go-cli"

// replica is the local replica: a bbolt store holding the vault's
// documents in their local (plaintext) form, the vault's settings and
// this device's node id.
type replica struct {
	path  string
	st    store.Store // wrapped: its errors are *localError
	temp  string      // a temporary folder removed by Close, if any
	vault *vaultRecord
	v     *vault.Vault // the vault over st
	now   func() time.Time
}

// vaultRecord is what the replica knows of its vault.
type vaultRecord struct {
	// Tweaks are the vault's must-match settings (the remote's PREFERRED
	// tweak values, or those of a new vault). The passphrase is never
	// part of them.
	Tweaks  negotiate.TweakValues   `json:"tweak_values"`
	Remotes map[string]*remoteState `json:"remotes,omitempty"`
}

// remoteState is what the replica remembers of one remote.
type remoteState struct {
	LastPull    time.Time `json:"last_pull,omitzero"`
	LastPullSeq string    `json:"last_pull_seq,omitempty"`
	LastPush    time.Time `json:"last_push,omitzero"`
	LastPushSeq string    `json:"last_push_seq,omitempty"`
	// JournalID and JournalPrefix identify a journal bucket's checkpoint
	// in the replica (journalsync.CheckpointID), for status to read its
	// quarantine without contacting the bucket.
	JournalID     string `json:"journal_id,omitempty"`
	JournalPrefix string `json:"journal_prefix,omitempty"`
}

// storePath returns the replica's path from the flag, the configuration
// or the default.
func storePath(flagValue string, cfg *config) string {
	switch {
	case flagValue != "":
		return flagValue
	case cfg != nil && cfg.Store != "":
		return cfg.Store
	}
	return defaultStore
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
	r := &replica{path: path, now: e.now}
	r.st = &localStore{Store: st, path: path}
	if e.wrapStore != nil {
		r.st = &localStore{Store: e.wrapStore(st), path: path}
	}
	err = r.load(e.ctx)
	if err == nil {
		r.v, err = vault.Open(e.ctx, r.st, vault.Options{Now: r.now})
	}
	if err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// newVault records the settings of a new vault in a replica that holds
// none.
func (r *replica) newVault(ctx context.Context, s livesync.Settings) error {
	return r.reopen(ctx, &s)
}

// reopen opens the vault again over the replica, after the replica's
// record of it was written here (with settings s, if not nil).
func (r *replica) reopen(ctx context.Context, s *livesync.Settings) error {
	r.v.Close()
	v, err := vault.Open(ctx, r.st, vault.Options{Now: r.now, Settings: s})
	if err != nil {
		return err
	}
	r.v = v
	return r.load(ctx)
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

func (r *replica) load(ctx context.Context) error {
	raw, err := r.st.GetLocal(ctx, vaultLocalID)
	if errors.Is(err, engine.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	var v vaultRecord
	if err := json.Unmarshal(raw, &v); err != nil {
		return &localError{r.path, fmt.Errorf("the vault record is damaged: %v", err)}
	}
	r.vault = &v
	return nil
}

// save writes the vault record.
func (r *replica) save(ctx context.Context) error {
	b, err := json.Marshal(r.vault)
	if err != nil {
		return err
	}
	return r.st.PutLocal(ctx, vaultLocalID, b)
}

// setVault records the vault's settings (once: a replica holds one vault).
func (r *replica) setVault(ctx context.Context, tv negotiate.TweakValues) error {
	if r.vault != nil {
		return nil
	}
	r.vault = &vaultRecord{Tweaks: tv}
	return r.save(ctx)
}

// remote returns the state kept for a remote, creating it.
func (r *replica) remote(id string) *remoteState {
	if r.vault.Remotes == nil {
		r.vault.Remotes = map[string]*remoteState{}
	}
	s := r.vault.Remotes[id]
	if s == nil {
		s = &remoteState{}
		r.vault.Remotes[id] = s
	}
	return s
}

// nodeID returns this device's node id, kept in the replica as the
// plugin keeps it in its local database (_local/obsydian_livesync_nodeinfo),
// creating it on first use.
func (r *replica) nodeID(ctx context.Context) (string, error) {
	id := negotiate.NodeInfoDocID[len("_local/"):]
	raw, err := r.st.GetLocal(ctx, id)
	if err == nil {
		var d negotiate.NodeInfoDoc
		if json.Unmarshal(raw, &d) == nil && d.NodeID != "" {
			return d.NodeID, nil
		}
	} else if !errors.Is(err, engine.ErrNotFound) {
		return "", err
	}
	node, err := newNodeID()
	if err != nil {
		return "", err
	}
	if err := r.putNodeID(ctx, node); err != nil {
		return "", err
	}
	return node, nil
}

// putNodeID records node as this device's node id.
func (r *replica) putNodeID(ctx context.Context, node string) error {
	b, _ := json.Marshal(negotiate.NodeInfoDoc{ID: negotiate.NodeInfoDocID, Type: negotiate.TypeNodeInfo, NodeID: node, V20220607: true})
	return r.st.PutLocal(ctx, negotiate.NodeInfoDocID[len("_local/"):], b)
}

// nodeIDIfAny returns this device's node id, "" if the replica has none
// yet (it creates nothing).
func (r *replica) nodeIDIfAny(ctx context.Context) (string, error) {
	raw, err := r.st.GetLocal(ctx, negotiate.NodeInfoDocID[len("_local/"):])
	if errors.Is(err, engine.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var d negotiate.NodeInfoDoc
	if err := json.Unmarshal(raw, &d); err != nil {
		return "", nil
	}
	return d.NodeID, nil
}

// settingsOf returns the format settings of tweak values, without a
// passphrase.
func settingsOf(tv negotiate.TweakValues) (livesync.Settings, error) {
	// FromTweakValues validates the result, and an encrypted vault needs a
	// passphrase to be valid: give a placeholder, then take it away.
	s, err := livesync.FromTweakValues(livesync.Settings{Passphrase: "-"}, tv)
	if err != nil {
		return s, fmt.Errorf("the vault's settings: %w", err)
	}
	s.Passphrase = ""
	return s, nil
}

// newVaultSettings returns the settings of a new vault: upstream's
// defaults with the self-hosted CouchDB preset's chunk size, changed by c.
func newVaultSettings(c vaultConfig) livesync.Settings {
	s := livesync.Settings{CustomChunkSize: 60}
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

// needsPassphrase reports whether a vault with s needs the passphrase to
// make ids or to talk to a remote.
func needsPassphrase(s livesync.Settings) bool { return s.Encrypt || s.PathObfuscation }

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
