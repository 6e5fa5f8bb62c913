//go:build !js

package livesyncp2p

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/livesync-go/livesync-go/engine/livesyncrpc"
)

// maxDecisionsFile bounds the decisions file read at open.
const maxDecisionsFile = 16 << 20

// FileDecisions is a livesyncrpc.Decisions kept in a JSON file, the
// plugin's "p2p-device-decisions": an object mapping each device name to
// true (accept) or false (deny). Every change rewrites the file
// atomically (a temporary file in the same directory, synced, then
// renamed over it) with mode 0600. It is safe for concurrent use within
// one process; two processes sharing the file would overwrite each
// other's changes.
type FileDecisions struct {
	path string
	mu   sync.Mutex
	m    map[string]bool
}

var _ livesyncrpc.Decisions = (*FileDecisions)(nil)

// OpenFileDecisions reads the decisions file at path; a file that does
// not exist yet is empty and is created by the first change. A file that
// is not such a JSON object is an error: it is never emptied silently.
func OpenFileDecisions(path string) (*FileDecisions, error) {
	if path == "" {
		return nil, errors.New("livesyncp2p: decisions file: no path")
	}
	d := &FileDecisions{path: path, m: map[string]bool{}}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return d, nil
	}
	if err != nil {
		return nil, fmt.Errorf("livesyncp2p: decisions file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxDecisionsFile+1))
	if err != nil {
		return nil, fmt.Errorf("livesyncp2p: decisions file %s: %w", path, err)
	}
	if len(b) > maxDecisionsFile {
		return nil, fmt.Errorf("livesyncp2p: decisions file %s is larger than %d bytes", path, maxDecisionsFile)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return d, nil
	}
	if err := json.Unmarshal(b, &d.m); err != nil || d.m == nil {
		if err == nil {
			err = errors.New("not a JSON object")
		}
		return nil, fmt.Errorf("livesyncp2p: decisions file %s is corrupt (want {\"device name\": true|false}; fix or remove it): %w", path, err)
	}
	return d, nil
}

// Path returns the file's path.
func (d *FileDecisions) Path() string { return d.path }

// All returns a copy of the decisions.
func (d *FileDecisions) All() map[string]bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]bool, len(d.m))
	for k, v := range d.m {
		out[k] = v
	}
	return out
}

// Decision returns the decision stored for the device name.
func (d *FileDecisions) Decision(_ context.Context, name string) (accept, ok bool, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	accept, ok = d.m[name]
	return accept, ok, nil
}

// SetDecision stores a decision for the device name and rewrites the
// file; on failure the decision is not kept.
func (d *FileDecisions) SetDecision(_ context.Context, name string, accept bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	old, had := d.m[name]
	if had && old == accept {
		return nil
	}
	d.m[name] = accept
	if err := d.save(); err != nil {
		if had {
			d.m[name] = old
		} else {
			delete(d.m, name)
		}
		return err
	}
	return nil
}

// DeleteDecision forgets the decision for the device name and rewrites
// the file.
func (d *FileDecisions) DeleteDecision(_ context.Context, name string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	old, had := d.m[name]
	if !had {
		return nil
	}
	delete(d.m, name)
	if err := d.save(); err != nil {
		d.m[name] = old
		return err
	}
	return nil
}

// save writes d.m to the file atomically; d.mu is held.
func (d *FileDecisions) save() error {
	b, err := json.MarshalIndent(d.m, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	dir := filepath.Dir(d.path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(d.path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("livesyncp2p: decisions file: %w", err)
	}
	name := tmp.Name()
	fail := func(err error) error {
		_ = tmp.Close()
		_ = os.Remove(name)
		return fmt.Errorf("livesyncp2p: decisions file: %w", err)
	}
	if err := tmp.Chmod(0o600); err != nil {
		return fail(err)
	}
	if _, err := tmp.Write(b); err != nil {
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		_ = os.Remove(name)
		return fmt.Errorf("livesyncp2p: decisions file: %w", err)
	}
	if err := os.Rename(name, d.path); err != nil {
		_ = os.Remove(name)
		return fmt.Errorf("livesyncp2p: decisions file: %w", err)
	}
	if dh, err := os.Open(dir); err == nil {
		_ = dh.Sync()
		_ = dh.Close()
	}
	return nil
}
