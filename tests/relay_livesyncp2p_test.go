package tests

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/adapters/p2p/livesyncp2p"
	"github.com/livesync-go/livesync-go/adapters/p2p/trysteronet"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/livesyncrpc"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/trystero"
)

const (
	lsp2pRoom      = "relay-livesync-p2p-room"
	lsp2pRoomPass  = "relay room passphrase"
	lsp2pAdminPass = "relay-admin-password"
)

// lsp2pRelayStatus is the part of /status these tests read.
type lsp2pRelayStatus struct {
	Databases []struct {
		Name          string `json:"name"`
		HeldDocuments int    `json:"held_documents"`
		LiveSyncP2P   []struct {
			Group       string `json:"group"`
			State       string `json:"state"`
			Error       string `json:"error"`
			SelfID      string `json:"self_id"`
			Rejoins     int    `json:"rejoins"`
			PullsServed int    `json:"pulls_served"`
			PullsMade   int    `json:"pulls_made"`
			Peers       []struct {
				ID         string `json:"id"`
				Name       string `json:"name"`
				Accepted   bool   `json:"accepted"`
				HuntSource bool   `json:"hunt_source"`
			} `json:"peers"`
		} `json:"livesync_p2p"`
	} `json:"databases"`
}

// lsp2pRelay is the relay binary with database "vault" (the E2EE vault
// dump's passphrase) in a LiveSync P2P room on its own /_nostr.
type lsp2pRelay struct{ p2pRelay }

func (r *lsp2pRelay) lsp2pStatus(t *testing.T) lsp2pRelayStatus {
	t.Helper()
	code, b := r.do(t, "GET", "/status", "")
	var s lsp2pRelayStatus
	if code != 200 || json.Unmarshal(b, &s) != nil || len(s.Databases) != 1 || len(s.Databases[0].LiveSyncP2P) != 1 {
		t.Fatalf("/status: %d %s", code, b)
	}
	return s
}

// startLSP2PRelay starts the relay binary: database "vault" with the
// vault passphrase, in room lsp2pRoom on its own /_nostr (loopback
// candidates only), accepting devices named go-device*, with a pushed
// delay short enough for the test and long enough for the held note's
// chunks to appear on the device before the hunt's first pass.
func startLSP2PRelay(t *testing.T, vaultPass string) *lsp2pRelay {
	t.Helper()
	bin := buildRelay(t)
	wd := t.TempDir()
	conf := `data_dir = "data"

[[users]]
name = "admin"
password_env = "ADMIN_PASS"
admin = true

[[databases]]
name = "vault"
passphrase_env = "VAULT_PASS"

[[databases.livesync_p2p]]
group = "` + lsp2pRoom + `"
room_passphrase_env = "ROOM_PASS"
auto_accept = "~^go-device"
loopback_only = true
stun = []

[purgatory]
pushed_delay = "5s"
`
	if err := os.WriteFile(filepath.Join(wd, "relay.toml"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"ADMIN_PASS=" + lsp2pAdminPass, "VAULT_PASS=" + vaultPass, "ROOM_PASS=" + lsp2pRoomPass}
	p := startRelayOpts(t, bin, wd, relayStart{env: env, args: []string{"--config", filepath.Join(wd, "relay.toml"), "--listen", "127.0.0.1:0"}, graceful: true})
	r := &lsp2pRelay{p2pRelay{p: p, wd: wd}}
	upPoll(t, "the relay to join its LiveSync P2P room", func() bool {
		return r.lsp2pStatus(t).Databases[0].LiveSyncP2P[0].State == "joined"
	}, func() string { return p.output() })
	return r
}

// lsp2pDevice joins the relay's room as a Go LiveSync device named name
// over db (the plaintext local form), accepting and watching the relay
// (it pulls when the relay announces changes).
func lsp2pDevice(t *testing.T, r *lsp2pRelay, name, vaultPass string, db store.Store) *livesyncp2p.Node {
	t.Helper()
	n, err := livesyncp2p.Open(ctxT(t), livesyncp2p.Config{
		Room: trysteronet.Config{RoomID: lsp2pRoom, Password: trystero.RoomPassword(lsp2pRoomPass),
			Relays: []string{"ws" + strings.TrimPrefix(r.p.url, "http") + "/_nostr"}, STUN: []string{}, LoopbackOnly: true},
		Peer: livesyncrpc.Config{DB: db, DBName: livesyncrpc.DBName("vault"), DeviceName: name, Passphrase: vaultPass, AutoAccept: "relay",
			Tweaks: readVaultDump(t).Settings.Effective, Follow: "relay"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	// The relay serves a device once it has its advertisement.
	upPoll(t, "the relay to know "+name, func() bool {
		for _, p := range r.lsp2pStatus(t).Databases[0].LiveSyncP2P[0].Peers {
			if p.Name == name && p.Accepted {
				return true
			}
		}
		return false
	}, nil)
	return n
}

// plainDump returns the vault dump's documents in the plugin's
// plaintext local form (decoded with the dump's own salt), as a P2P
// device holds them.
func plainDump(t *testing.T, d vaultDump) []json.RawMessage {
	t.Helper()
	salt, err := base64.StdEncoding.DecodeString(d.FixedValues.PBKDF2SaltBase64)
	if err != nil {
		t.Fatal(err)
	}
	codec, err := livesync.New(livesync.Config{Settings: dumpSettings(t, d, d.FixedValues.Passphrase), Salt: salt})
	if err != nil {
		t.Fatal(err)
	}
	var out []json.RawMessage
	for _, r := range d.Remote.AllDocs {
		doc, err := livesync.ParseDoc(r.Doc)
		if err != nil {
			t.Fatal(err)
		}
		p, err := codec.DecodeRemote(doc)
		if err != nil {
			t.Fatalf("decoding %s: %v", r.ID, err)
		}
		b, _ := p.MarshalJSON()
		out = append(out, b)
	}
	return out
}

// storeDocs returns every document of st (winning revisions).
func storeDocs(t *testing.T, st store.Store) []json.RawMessage {
	t.Helper()
	ctx := ctxT(t)
	page, err := st.Changes(ctx, engine.ChangesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var refs []engine.DocRev
	for _, c := range page.Results {
		refs = append(refs, engine.DocRev{ID: c.ID, Rev: c.Revs[0]})
	}
	docs, err := st.BulkGet(ctx, refs)
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

// decodedMap is docMap of remote-form documents decoded with codec.
func decodedMap(t *testing.T, docs []json.RawMessage, codec *livesync.Codec) map[string]string {
	t.Helper()
	var plain []json.RawMessage
	for _, raw := range docs {
		doc, err := livesync.ParseDoc(raw)
		if err != nil {
			t.Fatal(err)
		}
		p, err := codec.DecodeRemote(doc)
		if err != nil {
			t.Fatalf("decoding %s: %v", doc.ID(), err)
		}
		b, _ := p.MarshalJSON()
		plain = append(plain, b)
	}
	return docMap(t, plain)
}

// TestRelayLiveSyncP2P runs the relay binary as an always-on device of a
// LiveSync P2P room on its own /_nostr. A CouchDB client sets the vault
// up (handshake with the plugin's E2EE settings) and pushes a note. A Go
// LiveSync device holding the plugin's E2EE vault dump in plaintext
// syncs with the relay (pull, then the relay pulls through reqSync)
// while a PouchDB device (the plugin's replication) syncs its own note
// over HTTP at the same time. Then the CouchDB side reads the whole
// dump, encrypted with the vault's codec, the P2P device has both HTTP
// clients' notes, and all hold the same documents and revisions. A later
// HTTP write reaches the device through the relay's broadcast. A note
// the device has without its chunks is held on the relay, served
// neither over HTTP nor to another device, until the hunt fetches the
// chunks from the device.
func TestRelayLiveSyncP2P(t *testing.T) {
	t.Parallel()
	d := readVaultDump(t)
	pass := d.FixedValues.Passphrase
	t0 := time.Now()
	r := startLSP2PRelay(t, pass)
	t.Logf("the relay joined its room in %v", time.Since(t0).Round(time.Millisecond))
	ctx := ctxT(t)
	db, err := couchdb.New(couchdb.Config{URL: r.p.url, Database: "vault", User: "admin", Password: lsp2pAdminPass})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	codec := handshakeCodec(t, db, "relay-lsp2p-client", dumpSettings(t, d, pass))
	// The milestone the handshake wrote gives the vault's settings: the
	// relay joins the room again with them.
	upPoll(t, "the relay to rejoin with the vault's settings", func() bool {
		s := r.lsp2pStatus(t).Databases[0].LiveSyncP2P[0]
		return s.Rejoins >= 1 && s.State == "joined"
	}, func() string { return r.p.output() })
	t.Logf("it joined again with the vault's settings %v after the start", time.Since(t0).Round(time.Millisecond))
	want := dumpInputs(t, d)
	httpMeta := lsp2pPush(t, db, codec, want, "From CouchDB.md", "# Written by a CouchDB client\n")

	pouch := startDevice(t, couchEnv{url: r.p.url, user: "admin", password: lsp2pAdminPass}, "vault", "pouch")
	pouchMeta, pouchChunks := relayMainNote(t, codec, "From PouchDB.md", "# Written on a PouchDB device\n")
	want["From PouchDB.md"] = []byte("# Written on a PouchDB device\n")
	pouch.load(append([]json.RawMessage{pouchMeta}, pouchChunks...))
	dev := newMemoryStore(t)
	dump := plainDump(t, d)
	if _, err := dev.BulkDocs(ctx, dump); err != nil {
		t.Fatal(err)
	}
	n := lsp2pDevice(t, r, "go-device", pass, dev)
	start := time.Now()
	type syncRes struct {
		res livesyncrpc.Result
		err error
	}
	done := make(chan syncRes, 1)
	go func() {
		res, err := n.Sync(ctx, "relay", livesyncrpc.PullOptions{})
		done <- syncRes{res, err}
	}()
	pr := pouch.sync()
	sr := <-done
	if sr.err != nil {
		t.Fatalf("the device's sync with the relay: %v", sr.err)
	}
	t.Logf("at once in %v: the P2P device pulled %d documents, the relay the %d of the dump; the PouchDB device pushed %d, pulled %d; tweak differences %v",
		time.Since(start).Round(time.Millisecond), sr.res.Docs, len(dump), pr.Push.DocsWritten, pr.Pull.DocsWritten, sr.res.TweakMismatch)
	// A note whose chunks came in a later batch is released once they
	// are stored; the P2P device gets the PouchDB note by its sync or the
	// relay's broadcast.
	upPoll(t, "no note held on the relay", func() bool { return r.lsp2pStatus(t).Databases[0].HeldDocuments == 0 }, nil)
	lsp2pWaitDoc(t, dev, httpMeta, httpMeta1(t, pouchMeta))

	// A CouchDB client's later note reaches the device without a sync of
	// its own: the relay announces the change and the device pulls.
	start = time.Now()
	lsp2pWaitDoc(t, dev, lsp2pPush(t, db, codec, want, "Later.md", "written over HTTP after the sync\n"))
	t.Logf("the relay's broadcast brought a CouchDB client's note to the device in %v", time.Since(start).Round(time.Millisecond))
	pouch.sync()
	pouch.fetchChunks(codec)

	devDocs := docMap(t, storeDocs(t, dev))
	sameDocs(t, "the P2P device and the relay over HTTP", devDocs, decodedMap(t, dbDocs(t, db), codec))
	pouchDocs := decodedMap(t, pouch.docs(), codec)
	for id, doc := range devDocs {
		if p, ok := pouchDocs[id]; (ok || !strings.HasPrefix(id, "h:")) && p != doc {
			t.Fatalf("the P2P device and the PouchDB device: %s differs:\n%s\n%s", id, doc, p)
		}
	}
	for _, docs := range [][]json.RawMessage{dbDocs(t, db), pouch.docs()} {
		files, _ := decodeDocs(t, docs, codec)
		sameFiles(t, files, want)
	}

	testLSP2PHeldUntilChunks(t, r, n, db, dev, codec)
}

// lsp2pPush writes a note over HTTP and adds it to want; it returns its
// metadata's id.
func lsp2pPush(t *testing.T, db *couchdb.DB, codec *livesync.Codec, want map[string][]byte, path, text string) string {
	t.Helper()
	meta, chunks := relayMainNote(t, codec, path, text)
	res, err := db.BulkDocs(ctxT(t), append([]json.RawMessage{meta}, chunks...))
	if err != nil || slices.ContainsFunc(res, func(r engine.BulkDocResult) bool { return r.Error != "" }) {
		t.Fatalf("push over HTTP: %v %+v", err, res)
	}
	want[path] = []byte(text)
	return httpMeta1(t, meta)
}

// lsp2pWaitDoc waits until st has every id.
func lsp2pWaitDoc(t *testing.T, st store.Store, ids ...string) {
	t.Helper()
	upPoll(t, "the P2P device to have "+strings.Join(ids, ", "), func() bool {
		for _, id := range ids {
			if _, err := st.Get(ctxT(t), id, store.GetOptions{}); err != nil {
				return false
			}
		}
		return true
	}, nil)
}

// testLSP2PHeldUntilChunks: the device's new note crosses metadata first
// (its chunks are not in its store yet): the relay holds it, serving it
// neither over HTTP nor to a second device, until its hunt fetches the
// chunks from the device.
func testLSP2PHeldUntilChunks(t *testing.T, r *lsp2pRelay, n *livesyncp2p.Node, db *couchdb.DB, dev store.Store, codec *livesync.Codec) {
	ctx := ctxT(t)
	meta, chunks, err := codec.FileDocs("Held.md", []byte("metadata first, chunks later\n"), 1700000000000, 1700000000000)
	if err != nil {
		t.Fatal(err)
	}
	plain := func(doc livesync.Doc) json.RawMessage {
		doc["_rev"] = json.RawMessage(fmt.Sprintf("%q", "1-"+strings.Repeat("ab", 16)))
		b, _ := doc.MarshalJSON()
		return b
	}
	if _, err := dev.BulkDocs(ctx, []json.RawMessage{plain(meta.Doc())}); err != nil {
		t.Fatal(err)
	}
	page, err := db.Changes(ctx, engine.ChangesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if _, err := n.Sync(ctx, "relay", livesyncrpc.PullOptions{}); err != nil {
		t.Fatal(err)
	}
	upPoll(t, "the note held on the relay", func() bool { return r.lsp2pStatus(t).Databases[0].HeldDocuments == 1 }, nil)
	if ids := changedIDs(t, db); slices.Contains(ids, meta.ID) {
		t.Fatal("the relay serves the held note over HTTP")
	}
	t.Logf("the metadata was held %v after the sync began", time.Since(t0).Round(time.Millisecond))
	other := newMemoryStore(t)
	on := lsp2pDevice(t, r, "go-device-2", codec.Settings().Passphrase, other)
	if _, err := on.Pull(ctx, "relay", livesyncrpc.PullOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Get(ctx, meta.ID, store.GetOptions{}); err == nil {
		t.Fatal("the relay served the held note to another device")
	}
	// The chunks appear on the device; the relay's hunt asks it.
	var docs []json.RawMessage
	for _, c := range chunks {
		docs = append(docs, plain(livesync.ChunkDoc(c)))
	}
	if _, err := dev.BulkDocs(ctx, docs); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	waitInFeed(t, db, page.LastSeq, meta.ID)
	t.Logf("the hunt fetched the held note's chunks from the device: released %v after they appeared", time.Since(start).Round(time.Millisecond))
	files, _ := decodeDocs(t, dbDocs(t, db), codec)
	if string(files["Held.md"]) != "metadata first, chunks later\n" {
		t.Fatalf("the released note reads %q", files["Held.md"])
	}
}

// httpMeta1 is the _id of a remote-form document.
func httpMeta1(t *testing.T, doc json.RawMessage) string {
	t.Helper()
	var head struct {
		ID string `json:"_id"`
	}
	if err := json.Unmarshal(doc, &head); err != nil {
		t.Fatal(err)
	}
	return head.ID
}

// changedIDs lists the ids of db's changes feed.
func changedIDs(t *testing.T, db *couchdb.DB) []string {
	t.Helper()
	page, err := db.Changes(ctxT(t), engine.ChangesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range page.Results {
		ids = append(ids, c.ID)
	}
	return ids
}
