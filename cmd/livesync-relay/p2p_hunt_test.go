package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/livesync-go/livesync-go/adapters/p2p"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/store"
)

// startP2PHuntRelay starts a relay whose database "notes" (no upstreams,
// no passphrase) is in group "family" with phones approved, and whose hunt has limits that
// bind: one request at a time per source, two a window, two ids each;
// a pushed note is hunted after 200 ms instead of the default minutes.
func startP2PHuntRelay(t *testing.T, phones ...peer.ID) *running {
	t.Helper()
	var approved []string
	for i, id := range phones {
		approved = append(approved, fmt.Sprintf("{peer = %q, device = \"phone %d\"}", id, i))
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "relay.toml")
	text := fmt.Sprintf(`
[[databases]]
name = "notes"
[[databases.p2p]]
group = "family"
passphrase_env = "NOTES_GROUP"
approved = [%s]

[hunt]
max_in_flight = 1
max_per_window = 2
window = "600ms"
batch_size = 2
backoff_base = "100ms"
backoff_cap = "200ms"

[purgatory]
pushed_delay = "200ms"

[p2p]
listen = ["/ip4/127.0.0.1/tcp/0"]
circuit_relay = false
`, strings.Join(approved, ", "))
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{envAdminPassword: "test-admin-password", "NOTES_GROUP": p2pTestNotesPass}
	rn := start(t, []string{"--data-dir", filepath.Join(dir, "data"), "--config", cfg}, env)
	rn.user, rn.pass = defaultAdminName, env[envAdminPassword]
	return rn
}

// peerHunt waits until /status shows peer id's part in the hunt with ok
// true of it, and returns it.
func (rn *running) peerHunt(id peer.ID, what string, ok func(p p2pPeerStatus) bool) p2pPeerStatus {
	rn.t.Helper()
	var last p2pPeerStatus
	waitUntil(rn.t, "peer "+id.String()+" "+what, func() bool {
		for _, g := range rn.status().db(rn.t, "notes").P2P {
			for _, p := range g.Peers {
				if p.ID == id.String() {
					last = p
					return ok(p)
				}
			}
		}
		return false
	}, func() string {
		b, _ := json.MarshalIndent(rn.status().db(rn.t, "notes"), "", " ")
		return string(b) + "\n" + rn.out.String()
	})
	return last
}

// A note pushed over HTTP without its chunks is held on a relay database
// that has no upstream; an approved peer of its group that is connected
// holds the chunks, and the relay's hunt fetches them from it, within the
// per-source limits, stores them with the peer's revisions and releases
// the note. A revoked peer stops being a source.
func TestP2PHuntFetchesHeldChunksFromPeers(t *testing.T) {
	ctx := t.Context()
	phone := p2pTestHost(t)
	rn := startP2PHuntRelay(t, phone.ID())
	var text strings.Builder
	for i := range 40 {
		fmt.Fprintf(&text, "line %d of a note whose chunks only the phone has\n", i)
	}
	meta, chunks := note(t, plainCodec(t), "Notes/From the phone.md", text.String())
	if len(chunks) < 5 {
		t.Fatalf("%d chunks, want at least 5 (several requests of two)", len(chunks))
	}
	// The phone holds the chunks in the remote form, with revisions.
	st, err := store.NewMemory(store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	docs := make([]json.RawMessage, len(chunks))
	revs := map[string]string{}
	for i, c := range chunks {
		docs[i], _ = c.MarshalJSON()
		var rev string
		json.Unmarshal(c["_rev"], &rev)
		revs[c.ID()] = rev
	}
	if _, err := st.BulkDocs(ctx, docs); err != nil {
		t.Fatal(err)
	}
	rh := rn.r.p2p.host
	allow := p2p.NewAllowList()
	allow.Allow(rh.ID(), "relay")
	t.Cleanup(p2p.ServeChunks(phone, p2p.ServerConfig{Store: p2p.DocChunks(st), Allow: allow}))

	// The metadata arrives first, from an HTTP client: held.
	rn.pushDocs("notes", meta)
	if slices.Contains(rn.changedIDs("notes"), meta.ID()) {
		t.Fatal("the note is in the changes feed before its chunks")
	}
	if d := rn.status().db(t, "notes"); d.HeldDocuments != 1 || d.Hunt == nil {
		t.Fatalf("held %d, hunt %v: want the note held and a hunt without upstreams", d.HeldDocuments, d.Hunt)
	}
	if err := phone.Connect(ctx, peer.AddrInfo{ID: rh.ID(), Addrs: rh.Addrs()}); err != nil {
		t.Fatal(err)
	}
	rn.peerHunt(phone.ID(), "a source", func(p p2pPeerStatus) bool { return p.Hunt != nil && p.Hunt.Source })
	rn.waitInFeed("notes", meta.ID())
	rn.waitReleased("notes")
	for _, c := range chunks {
		var got map[string]any
		if err := json.Unmarshal(rn.admin("GET", "/notes/"+url.PathEscape(c.ID()), nil, 200), &got); err != nil {
			t.Fatal(err)
		}
		if got["_rev"] != revs[c.ID()] || got["type"] != "leaf" {
			t.Errorf("chunk %s stored as %v, want the phone's revision %s", c.ID(), got, revs[c.ID()])
		}
	}
	p := rn.peerHunt(phone.ID(), "the source of every chunk", func(p p2pPeerStatus) bool {
		return p.Hunt != nil && p.Hunt.Chunks == uint64(len(chunks))
	})
	h := p.Hunt
	minRequests := uint64((len(chunks) + 1) / 2)
	if !h.Source || h.Requests < minRequests || h.Found < minRequests || h.Failed != 0 || h.Unusable != 0 {
		t.Errorf("the phone's hunt: %+v, want at least %d requests, all found", h, minRequests)
	}
	if h.MaxInFlight != 1 || h.MaxInWindow < 1 || h.MaxInWindow > 2 {
		t.Errorf("max in flight %d, in window %d: the limits are 1 and 2", h.MaxInFlight, h.MaxInWindow)
	}
	if p.ChunksIn != uint64(len(chunks)) {
		t.Errorf("chunks_in %d, want %d", p.ChunksIn, len(chunks))
	}
	metrics := string(rn.admin("GET", "/metrics", nil, 200))
	for _, want := range []string{
		fmt.Sprintf(`livesync_relay_p2p_hunt_fetches_total{db="notes",group="family",outcome="found",peer="%s"} %d`, phone.ID(), h.Found),
		fmt.Sprintf(`livesync_relay_p2p_hunt_max_in_flight{db="notes",group="family",peer="%s"} 1`, phone.ID()),
		fmt.Sprintf(`livesync_relay_p2p_chunks_total{db="notes",direction="in",group="family",peer="%s"} %d`, phone.ID(), len(chunks)),
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// The relay serves the chunks it stored with their revisions too.
	ids := make([]engine.ChunkID, len(chunks))
	for i, c := range chunks {
		ids[i] = c.ID()
	}
	served, _, err := p2p.NewRemote(phone, peer.AddrInfo{ID: rh.ID(), Addrs: rh.Addrs()}, p2p.RemoteOptions{Group: "family"}).
		ChunkClient().FetchRaw(ctx, ids)
	if err != nil || len(served) != len(chunks) {
		t.Fatalf("the relay served %d of %d chunks: %v", len(served), len(chunks), err)
	}
	for _, c := range served {
		if c.Rev != revs[c.ID] {
			t.Errorf("the relay serves chunk %s with revision %q, want %q", c.ID, c.Rev, revs[c.ID])
		}
	}

	rn.admin("DELETE", "/_p2p/notes/family/peers/"+phone.ID().String(), nil, 200)
	// A revoked peer is no longer listed; the hunt drops it as a source.
	ph := rn.r.p2p.groups[0].huntOf()
	waitUntil(t, "the revoked peer is no source of the hunt", func() bool { return !ph.status(phone.ID()).Source })
}

// e2eePhone is an approved device serving, over both protocols, chunk
// documents encrypted with salt, and group records with that salt.
func e2eePhone(t *testing.T, h host.Host, relay peer.ID, salt []byte, chunks []livesync.Doc) *p2pPhone {
	t.Helper()
	st, err := store.NewMemory(store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	docs := make([]json.RawMessage, len(chunks))
	for i, c := range chunks {
		docs[i], _ = c.MarshalJSON()
	}
	if _, err := st.BulkDocs(t.Context(), docs); err != nil {
		t.Fatal(err)
	}
	records := p2p.StoreRecords(st, "")
	params, _ := json.Marshal(negotiate.NewSyncParameters(salt))
	if _, err := records.Write(t.Context(), negotiate.RecordSyncParameters, params, ""); err != nil {
		t.Fatal(err)
	}
	allow := p2p.NewAllowList()
	allow.Allow(relay, "relay")
	t.Cleanup(p2p.Serve(h, p2p.ServeConfig{DB: p2p.Served{Endpoint: st, Chunks: p2p.DocChunks(st), Records: records}, Allow: allow}))
	return &p2pPhone{h: h, st: st}
}

type p2pPhone struct {
	h  host.Host
	st store.Store
}

// huntCodec is a codec of an end-to-end encrypted vault with salt,
// without path obfuscation (a relay without the passphrase reads its
// notes' chunk lists and holds them).
func huntCodec(t *testing.T, salt []byte) *livesync.Codec {
	t.Helper()
	c, err := livesync.New(livesync.Config{Settings: livesync.Settings{Encrypt: true, Passphrase: "vault passphrase"}, Salt: salt})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// An encrypted chunk is stored only in the database's own encryption: a
// relay without the vault passphrase does not take it from a peer whose
// salt is another (it would be a chunk the database's clients cannot
// decrypt) and the note stays held; a peer with the database's salt
// serves the very documents the database needs, stored as served.
func TestP2PHuntEncryptedChunksNeedTheDatabaseSalt(t *testing.T) {
	ctx := t.Context()
	saltDB, saltOther := bytes.Repeat([]byte{3}, negotiate.SaltSize), bytes.Repeat([]byte{4}, negotiate.SaltSize)
	var text strings.Builder
	for i := range 40 {
		fmt.Fprintf(&text, "line %d of an encrypted note\n", i)
	}
	meta, chunks := note(t, huntCodec(t, saltDB), "Notes/Secret.md", text.String())
	_, otherChunks := note(t, huntCodec(t, saltOther), "Notes/Secret.md", text.String())
	a, b := p2pTestHost(t), p2pTestHost(t)
	rn := startP2PHuntRelay(t, a.ID(), b.ID())
	params, _ := json.Marshal(negotiate.NewSyncParameters(saltDB))
	rn.admin("PUT", "/notes/_local/"+negotiate.SyncParametersLocalID, string(params), 201)
	rh := rn.r.p2p.host
	relayInfo := peer.AddrInfo{ID: rh.ID(), Addrs: rh.Addrs()}
	other := e2eePhone(t, a, rh.ID(), saltOther, otherChunks)
	rn.pushDocs("notes", meta)
	if err := other.h.Connect(ctx, relayInfo); err != nil {
		t.Fatal(err)
	}
	rn.peerHunt(other.h.ID(), "asked, its chunks unusable", func(p p2pPeerStatus) bool {
		return p.Hunt != nil && p.Hunt.Unusable > 0
	})
	if d := rn.status().db(t, "notes"); d.HeldDocuments != 1 || slices.Contains(rn.changedIDs("notes"), meta.ID()) {
		t.Fatal("the note was released with chunks of another salt")
	}
	same := e2eePhone(t, b, rh.ID(), saltDB, chunks)
	if err := same.h.Connect(ctx, relayInfo); err != nil {
		t.Fatal(err)
	}
	rn.waitInFeed("notes", meta.ID())
	for _, c := range chunks {
		var got map[string]any
		json.Unmarshal(rn.admin("GET", "/notes/"+url.PathEscape(c.ID()), nil, 200), &got)
		var data, rev string
		json.Unmarshal(c["data"], &data)
		json.Unmarshal(c["_rev"], &rev)
		if got["data"] != data || got["_rev"] != rev || got["e_"] != true {
			t.Errorf("chunk %s stored as %v, want the document the same-salt peer holds", c.ID(), got)
		}
	}
	if p := rn.peerHunt(same.h.ID(), "the source", func(p p2pPeerStatus) bool { return p.Hunt != nil && p.Hunt.Chunks > 0 }); p.Hunt.Unusable != 0 {
		t.Errorf("the same-salt peer's chunks: %+v", p.Hunt)
	}
}

// waitUntil polls cond (another goroutine or process changes what it
// reads) until it holds, for at most 30 s.
func waitUntil(t *testing.T, what string, cond func() bool, detail ...func() string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			d := ""
			for _, f := range detail {
				d += "\n" + f()
			}
			t.Fatalf("never: %s%s", what, d)
		}
		<-tick.C
	}
}

// chunkDoc: a plain chunk without a revision gets the one LiveSync gives
// a new chunk; an encrypted chunk is stored as served when the salts
// agree, re-encrypted with the database's salt when they do not and the
// relay has the passphrase, and refused otherwise, as is a malformed
// revision.
func TestP2PHuntChunkDoc(t *testing.T) {
	raw, err := chunkDoc(p2p.RawChunk{ID: "h:abc", Data: "plain text"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	json.Unmarshal(raw, &d)
	if d["_rev"] != store.ChunkRev("h:abc", "plain text") || d["data"] != "plain text" || d["type"] != "leaf" || d["e_"] != nil {
		t.Errorf("plain chunk without a revision: %s", raw)
	}
	settings := livesync.Settings{Encrypt: true, Passphrase: "vault passphrase"}
	codecOf := func(salt byte) *livesync.Codec {
		c, err := livesync.New(livesync.Config{Settings: settings, Salt: bytes.Repeat([]byte{salt}, negotiate.SaltSize)})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	peerCodec, dbCodec := codecOf(1), codecOf(2)
	enc, err := peerCodec.EncodeRemote(livesync.ChunkDoc(livesync.Chunk{ID: "h:+abc", Data: "secret words"}))
	if err != nil {
		t.Fatal(err)
	}
	var cipher string
	json.Unmarshal(enc["data"], &cipher)
	served := p2p.RawChunk{ID: "h:+abc", Data: cipher, Rev: "1-0a"}
	raw, err = chunkDoc(served, &chunkForm{forward: true})
	if err != nil {
		t.Fatal(err)
	}
	if json.Unmarshal(raw, &d); d["_rev"] != "1-0a" || d["e_"] != true || d["data"] != cipher {
		t.Errorf("same salt: %s", raw)
	}
	raw, err = chunkDoc(p2p.RawChunk{ID: served.ID, Data: cipher}, &chunkForm{from: peerCodec, to: dbCodec, relay: dbCodec})
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := livesync.ParseDoc(raw)
	if plain, err := plaintext(dbCodec, doc); err != nil || plain != "secret words" || doc.Rev() != store.ChunkRev("h:+abc", "secret words") {
		t.Errorf("re-encrypted: %s: %q %v", raw, plain, err)
	}
	if _, err := chunkDoc(served, &chunkForm{why: errOtherSalt}); !errors.Is(err, errOtherSalt) {
		t.Errorf("another salt, no passphrase: %v", err)
	}
	if _, err := chunkDoc(p2p.RawChunk{ID: served.ID, Data: cipher}, &chunkForm{forward: true}); !errors.Is(err, errNoChunkRev) {
		t.Errorf("encrypted chunk without a revision and no codec: %v", err)
	}
	for _, rev := range []string{"x", "0-ab", "1-", "1-xyz", "-1-ab"} {
		if _, err := chunkDoc(p2p.RawChunk{ID: "h:abc", Data: "d", Rev: rev}, nil); !errors.Is(err, engine.ErrMalformed) {
			t.Errorf("revision %q: %v, want malformed", rev, err)
		}
	}
}
