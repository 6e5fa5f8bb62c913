//go:build !js

package p2ptest

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/livesync-go/livesync-go/adapters/p2p"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/docid"
	"github.com/livesync-go/livesync-go/engine/holdback"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// The vault's end-to-end encryption passphrase, and the group's name and
// discovery passphrase, shared by the peers of a test.
const (
	vaultPassphrase = "correct horse battery staple"
	groupName       = "household-notes"
	groupPassphrase = "group: tulip umbrella quartz"
)

// settings are the vault's settings: the defaults of a new vault, end-to-end
// encrypted with vaultPassphrase.
func settings() livesync.Settings {
	s := vault.DefaultSettings(false)
	s.Encrypt = true
	s.Passphrase = vaultPassphrase
	return s
}

// eventually polls cond until it holds, failing the test with what cond
// last reported when it does not within timeout. It is the tests' only
// way to wait for something that happens on the network.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %v; last state: %s", what, timeout, state)
		}
		<-tick.C
	}
}

// newKey returns a fresh ed25519 identity and its peer id.
func newKey(t testing.TB) (crypto.PrivKey, peer.ID) {
	t.Helper()
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id, err := p2p.PeerID(key)
	if err != nil {
		t.Fatal(err)
	}
	return key, id
}

// newHost starts a loopback host with key; the test's cleanup closes it
// (closing it twice is harmless).
func newHost(t testing.TB, key crypto.PrivKey) host.Host {
	t.Helper()
	h, err := p2p.NewHost(context.Background(), p2p.Config{Identity: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// addrInfo is how another host reaches h.
func addrInfo(h host.Host) peer.AddrInfo {
	return peer.AddrInfo{ID: h.ID(), Addrs: h.Addrs()}
}

// memStore returns a memory store closed by the test's cleanup.
func memStore(t testing.TB, name string) store.Store {
	t.Helper()
	st, err := store.NewMemory(store.Options{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// openVault opens a vault over st with settings s; the cleanup closes it
// (not st).
func openVault(t testing.TB, st store.Store, s livesync.Settings, device string) *vault.Vault {
	t.Helper()
	v, err := vault.Open(context.Background(), st, vault.Options{Settings: &s, Device: negotiate.DeviceInfo{DeviceName: device}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

// attachOptions are what a peer's handshake with another peer asks.
func attachOptions(passphrase string) vault.AttachOptions {
	return vault.AttachOptions{Create: true, Passphrase: func() (string, error) { return passphrase, nil }}
}

// relayStore is the always-on peer's database as the relay keeps it: the
// hold-back over a memory store, holding the remote (encrypted) form.
func relayStore(t testing.TB) *holdback.Store {
	t.Helper()
	inner := memStore(t, "relay")
	hb, err := holdback.New(holdback.Config{}, holdback.Deps{Inner: inner})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hb.Close() })
	return hb
}

// relayServed is what the relay serves of its database to a group.
func relayServed(st store.Store) *p2p.Served {
	return &p2p.Served{Endpoint: st, Chunks: st, Records: p2p.StoreRecords(st, "")}
}

// tree is a vault's content: path -> text ("<held>" for a file whose
// chunks are not all local).
type tree map[string]string

func (a tree) String() string {
	keys := make([]string, 0, len(a))
	for k := range a {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		v := a[k]
		if len(v) > 24 {
			v = v[:24] + "…"
		}
		fmt.Fprintf(&b, "%s=%q ", k, v)
	}
	return fmt.Sprintf("%d files: %s", len(a), b.String())
}

func (a tree) equal(b tree) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// vaultTree reads every file of v from its replica alone.
func vaultTree(ctx context.Context, v *vault.Vault) (tree, error) {
	files, err := v.List(ctx, "", vault.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := tree{}
	for _, f := range files {
		if f.Held() {
			out[f.Meta.Path] = "<held>"
			continue
		}
		data, err := v.ReadMeta(ctx, f.Meta)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", f.Meta.Path, err)
		}
		out[f.Meta.Path] = string(data)
	}
	return out, nil
}

// remoteCodec is the vault's codec for the documents st holds in the
// remote form: s with the salt of the sync parameters in records.
func remoteCodec(ctx context.Context, records negotiate.Port, s livesync.Settings) (*livesync.Codec, error) {
	params, err := negotiate.EnsureSyncParameters(ctx, records, true)
	if err != nil {
		return nil, err
	}
	salt, err := params.Salt()
	if err != nil {
		return nil, fmt.Errorf("no salt yet: %w", err)
	}
	return livesync.New(livesync.Config{Settings: s, Salt: salt})
}

// storeTree decodes the files st holds in the remote form with codec:
// the always-on peer's view, compared with the vaults' own.
func storeTree(ctx context.Context, st store.Store, codec *livesync.Codec) (tree, error) {
	infos, err := st.AllDocs(ctx, store.AllDocsOptions{})
	if err != nil {
		return nil, err
	}
	chunks := map[string]string{}
	var metas []livesync.Meta
	for _, in := range infos {
		if docid.IsSystemID(in.ID) {
			continue
		}
		raw, err := st.Get(ctx, in.ID, store.GetOptions{})
		if err != nil {
			return nil, err
		}
		d, err := livesync.ParseDoc(raw)
		if err != nil {
			return nil, err
		}
		if d, err = codec.DecodeRemote(d); err != nil {
			return nil, err
		}
		switch {
		case docid.IsChunkID(in.ID):
			var c struct {
				Data string `json:"data"`
			}
			b, _ := json.Marshal(d)
			if err := json.Unmarshal(b, &c); err != nil {
				return nil, err
			}
			chunks[in.ID] = c.Data
		case d.IsFileDoc():
			m, err := livesync.ParseMeta(d)
			if err != nil {
				return nil, err
			}
			if !m.Deleted {
				metas = append(metas, m)
			}
		}
	}
	out := tree{}
	for _, m := range metas {
		data, err := livesync.ReadFile(m, func(id string) (string, error) {
			if c, ok := chunks[id]; ok {
				return c, nil
			}
			return "", engine.ErrNotFound
		})
		if err != nil {
			out[m.Path] = "<held>"
			continue
		}
		out[m.Path] = string(data)
	}
	return out, nil
}

// leaves describes the revisions of doc in st: its winning revision and
// its conflicting leaves.
func leaves(ctx context.Context, st store.Store, doc string) (rev string, conflicts []string, err error) {
	raw, err := st.Get(ctx, doc, store.GetOptions{Conflicts: true})
	if err != nil {
		return "", nil, err
	}
	var d struct {
		Rev       string   `json:"_rev"`
		Conflicts []string `json:"_conflicts"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return "", nil, err
	}
	return d.Rev, d.Conflicts, nil
}

// generation is the N of a revision "N-hash".
func generation(rev string) string {
	n, _, _ := strings.Cut(rev, "-")
	return n
}

// checkRevisions checks that every file of want has, in st, exactly one
// leaf whose generation is gens[path] (the number of edits made to it).
func checkRevisions(ctx context.Context, st store.Store, ids func(string) string, gens map[string]int) error {
	var errs []error
	for path, n := range gens {
		rev, conflicts, err := leaves(ctx, st, ids(path))
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", path, err))
		case len(conflicts) > 0:
			errs = append(errs, fmt.Errorf("%s: conflicting leaves %v beside %s", path, conflicts, rev))
		case generation(rev) != fmt.Sprint(n):
			errs = append(errs, fmt.Errorf("%s: revision %s after %d edits", path, rev, n))
		}
	}
	return errors.Join(errs...)
}

// changesSince lists the ids st's changes feed has after since.
func changesSince(ctx context.Context, st store.Store, since string) ([]string, string, error) {
	var ids []string
	for {
		page, err := st.Changes(ctx, engine.ChangesRequest{Since: since, Limit: 500})
		if err != nil {
			return nil, since, err
		}
		for _, r := range page.Results {
			ids = append(ids, r.ID)
		}
		if len(page.Results) == 0 || page.LastSeq == since {
			return ids, since, nil
		}
		since = page.LastSeq
		if page.Pending == 0 {
			return ids, since, nil
		}
	}
}

// background runs fn in a goroutine until the test ends: the cleanup
// cancels its context and waits for it.
func background(t testing.TB, fn func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		fn(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
}
