//go:build !js

package p2p

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/decorate"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/vault"
)

const vaultTestPassphrase = "correct horse battery staple"

var e2eeSettings = livesync.Settings{Encrypt: true, PathObfuscation: true}

// openTestVault opens a vault over a new memory replica.
func openTestVault(t *testing.T, name string) (*vault.Vault, store.Store) {
	t.Helper()
	st := memStore(t)
	s := e2eeSettings
	v, err := vault.Open(t.Context(), st, vault.Options{Settings: &s, Passphrase: vaultTestPassphrase,
		Device: negotiate.DeviceInfo{DeviceName: name}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v, st
}

// servedReplica is what a replica serves (as ServedVault wires it): its
// plaintext replica encoded with the group's salt, read from its own
// records under the group's prefix.
func servedReplica(st store.Store, group string) Served {
	records := StoreRecords(st, "livesync-go/p2p/"+group+"/")
	codec := func(ctx context.Context) (*livesync.Codec, error) {
		raw, _, err := records.Read(ctx, negotiate.RecordSyncParameters)
		if err != nil {
			return nil, err
		}
		salt, err := negotiate.SaltOf(raw)
		if err != nil {
			return nil, err
		}
		s := e2eeSettings
		s.Passphrase = vaultTestPassphrase
		return livesync.New(livesync.Config{Settings: s, Salt: salt})
	}
	enc := decorate.Encoded(st, codec)
	return Served{Endpoint: enc, Chunks: enc, Records: records}
}

// Two vaults sync through a peer: the client attaches to the serving
// replica (the first handshake writes the group's salt into its
// records), pushes a note and pulls the server's; both converge, and
// what travelled was encrypted.
func TestVaultSyncThroughPeer(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	server, serverStore := openTestVault(t, "server")
	client, _ := openTestVault(t, "client")
	if _, err := server.Write(ctx, "from-server.md", []byte("written on the server"), vault.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Write(ctx, "notes/from-client.md", []byte("written on the client"), vault.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	spy := &spyEndpoint{}
	served := servedReplica(serverStore, "g")
	spy.Endpoint = served.Endpoint
	served.Endpoint = spy
	p := servePeer(t, served, true, nil)

	link, err := client.Attach(ctx, p.remote, vault.AttachOptions{Create: true})
	if err != nil {
		t.Fatalf("attach: %v", err)
	}
	res, err := client.Sync(ctx, link, vault.SyncOptions{})
	if err != nil {
		t.Fatalf("sync: %v", err)
	}
	if res.Push.DocsWritten == 0 || res.Pull.DocsWritten == 0 {
		t.Fatalf("sync moved nothing: %+v", res.Result)
	}
	if got, err := client.Read(ctx, "from-server.md"); err != nil || string(got) != "written on the server" {
		t.Fatalf("the client reads %q, %v", got, err)
	}
	if got, err := server.Read(ctx, "notes/from-client.md"); err != nil || string(got) != "written on the client" {
		t.Fatalf("the server reads %q, %v", got, err)
	}
	for _, d := range spy.seen() {
		if strings.Contains(d, "written on the") || strings.Contains(d, "from-client.md") || strings.Contains(d, "from-server.md") {
			t.Fatalf("plaintext travelled between the peers: %.200s", d)
		}
	}
	// A second device joins the group's salt and gets both notes.
	other, _ := openTestVault(t, "other")
	r2 := NewRemote(newApprovedClient(t, p), addrInfo(p.server), RemoteOptions{Group: "g"})
	l2, err := other.Attach(ctx, r2, vault.AttachOptions{})
	if err != nil {
		t.Fatalf("second attach: %v", err)
	}
	if _, err := other.Sync(ctx, l2, vault.SyncOptions{}); err != nil {
		t.Fatalf("second sync: %v", err)
	}
	for name, want := range map[string]string{"from-server.md": "written on the server", "notes/from-client.md": "written on the client"} {
		if got, err := other.Read(ctx, name); err != nil || string(got) != want {
			t.Fatalf("the second device reads %s: %q, %v", name, got, err)
		}
	}
}

// newApprovedClient starts another client host that p's server approves.
func newApprovedClient(t *testing.T, p *peerPair) host.Host {
	h := newTestHost(t)
	p.allow.Allow(h.ID(), "another")
	return h
}

// spyEndpoint records the documents that cross it, both ways.
type spyEndpoint struct {
	engine.Endpoint
	mu   sync.Mutex
	docs []string
}

func (s *spyEndpoint) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.docs)
}

func (s *spyEndpoint) add(docs []json.RawMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range docs {
		s.docs = append(s.docs, string(d))
	}
}

func (s *spyEndpoint) BulkGet(ctx context.Context, revs []engine.DocRev) ([]json.RawMessage, error) {
	docs, err := s.Endpoint.BulkGet(ctx, revs)
	s.add(docs)
	return docs, err
}

func (s *spyEndpoint) BulkDocs(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	s.add(docs)
	return s.Endpoint.BulkDocs(ctx, docs)
}

// Remote.Chunks decodes the remote form a replica serves: an end-to-end
// encrypted chunk travels encrypted and arrives in plaintext; without a
// codec it arrives as served.
func TestRemoteChunksDecode(t *testing.T) {
	ctx := t.Context()
	st := memStore(t)
	served := servedReplica(st, "g")
	salt := make([]byte, negotiate.SaltSize)
	salt[0] = 9
	params, _ := json.Marshal(negotiate.NewSyncParameters(salt))
	if _, err := served.Records.Write(ctx, negotiate.RecordSyncParameters, params, ""); err != nil {
		t.Fatal(err)
	}
	chunk := engine.Chunk{ID: "h:+0123456789abc", Data: "secret chunk text"}
	if err := st.PutChunks(ctx, []engine.Chunk{chunk}); err != nil {
		t.Fatal(err)
	}
	p := servePeer(t, served, true, nil)
	s := e2eeSettings
	s.Passphrase = vaultTestPassphrase
	codec, err := livesync.New(livesync.Config{Settings: s, Salt: salt})
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.remote.Chunks(codec).FetchChunks(ctx, []engine.ChunkID{chunk.ID, "h:+absent"})
	if err != nil || len(res.Found) != 1 || res.Found[0] != chunk || len(res.Missing) != 1 {
		t.Fatalf("decoded fetch: %+v, %v", res, err)
	}
	raw, err := p.remote.Chunks(nil).FetchChunks(ctx, []engine.ChunkID{chunk.ID})
	if err != nil || len(raw.Found) != 1 || raw.Found[0].Data == chunk.Data || !strings.HasPrefix(raw.Found[0].Data, "%") {
		t.Fatalf("raw fetch: %+v, %v; want the ciphertext", raw, err)
	}
	if src := p.remote.Chunks(codec); src.ThrottleKey() != p.server.ID().String() || !src.CanFetchDirect() {
		t.Fatalf("throttle key %q", src.ThrottleKey())
	}
}
