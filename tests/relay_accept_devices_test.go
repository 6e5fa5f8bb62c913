package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
)

// TestRelayAcceptance is the relay's acceptance test with real clients,
// against the livesync-relay binary: real PouchDB 9 clients
// (tests/pouchdb/livesync-client.mjs, device mode) configured as LiveSync
// configures them — batch size 25, batch limit 25, the readChunksOnline
// selector on pull, chunks fetched with POST _all_docs keys — with E2EE on
// (documents encoded and decoded by the engine's codec, as the plugin's
// transform does on its side of the wire).
func TestRelayAcceptance(t *testing.T) {
	t.Parallel()
	pouchClient(t)
	bin := buildRelay(t)
	p := startRelayProcess(t, bin, t.TempDir())
	srv := fixedServer(relayCredentials(t, p))

	t.Run("TwoDevices", func(t *testing.T) { testAcceptTwoDevices(t, srv) })
	t.Run("DumpReadBack", func(t *testing.T) { testAcceptDumpReadBack(t, srv) })
	t.Run("HoldBack", func(t *testing.T) {
		// E2EE without path obfuscation: the chunk lists are readable,
		// the relay holds without a passphrase.
		settings := livesync.Settings{Encrypt: true, Passphrase: "accept-holdback"}
		testAcceptHoldBack(t, srv(t), freshDB(t, srv, nil), settings, "holdback")
	})
	t.Run("HoldBackObfuscated", func(t *testing.T) {
		// E2EE with path obfuscation: only a relay that has the vault
		// passphrase can read the chunk lists (in memory).
		settings := livesync.Settings{Encrypt: true, PathObfuscation: true, Passphrase: "accept-holdback-obfuscated"}
		e, db := startRelayWithPassphrase(t, bin, "obf", settings.Passphrase)
		testAcceptHoldBack(t, e, db, settings, "holdback-decrypt")
	})
}

// startRelayWithPassphrase starts a second relay whose configuration
// gives database db a vault passphrase (from the environment, as
// relay.example.toml says), with the admin from the configuration.
func startRelayWithPassphrase(t *testing.T, bin, db, passphrase string) (couchEnv, *couchdb.DB) {
	t.Helper()
	wd := t.TempDir()
	conf := fmt.Sprintf("data_dir = %q\n\n[[users]]\nname = \"admin\"\npassword_env = \"LSGO_ACCEPT_ADMIN_PASSWORD\"\nadmin = true\n\n"+
		"[[databases]]\nname = %q\npassphrase_env = \"LSGO_ACCEPT_PASSPHRASE\"\n", filepath.Join(wd, "data"), db)
	if err := os.WriteFile(filepath.Join(wd, "relay.toml"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	password := hexToken(t)
	p := startRelayArgs(t, bin, wd, []string{"LSGO_ACCEPT_ADMIN_PASSWORD=" + password, "LSGO_ACCEPT_PASSPHRASE=" + passphrase},
		"--config", filepath.Join(wd, "relay.toml"), "--listen", "127.0.0.1:0")
	if strings.Contains(p.output(), passphrase) || strings.Contains(p.output(), password) {
		t.Fatal("the relay printed a secret")
	}
	e := couchEnv{url: p.url, user: "admin", password: password}
	d, err := couchdb.New(couchdb.Config{URL: e.url, Database: db, User: e.user, Password: e.password})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return e, d
}

// pouchDevice is one LiveSync device: a livesync-client.mjs process in
// device mode, whose in-memory PouchDB lives as long as the process.
type pouchDevice struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Scanner
	stderr *bytes.Buffer
}

// startDevice starts a device syncing with database db of the server e.
func startDevice(t *testing.T, e couchEnv, db, name string) *pouchDevice {
	t.Helper()
	node, script := pouchClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	cmd := exec.CommandContext(ctx, node, filepath.Join(filepath.Dir(script), "livesync-client.mjs"),
		"--url", e.url, "--db", db, "--mode", "device")
	cmd.Env = append(os.Environ(), "LIVESYNC_TEST_COUCHDB_USER="+e.user, "LIVESYNC_TEST_COUCHDB_PASSWORD="+e.password)
	d := &pouchDevice{t: t, name: name, cmd: cmd, stderr: &bytes.Buffer{}}
	cmd.Stderr = d.stderr
	var err error
	if d.in, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.out = bufio.NewScanner(stdout)
	d.out.Buffer(nil, 256<<20)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.in.Close()
		if err := cmd.Wait(); err != nil && ctx.Err() == nil {
			t.Errorf("device %s: %v\n%s", name, err, d.stderr)
		}
		cancel()
	})
	return d
}

// do runs one command and decodes its answer into out (may be nil).
func (d *pouchDevice) do(cmd map[string]any, out any) {
	d.t.Helper()
	b, _ := json.Marshal(cmd)
	if _, err := d.in.Write(append(b, '\n')); err != nil {
		d.t.Fatalf("device %s: %v\n%s", d.name, err, d.stderr)
	}
	if !d.out.Scan() {
		d.t.Fatalf("device %s: no answer to %s (%v)\n%s", d.name, cmd["op"], d.out.Err(), d.stderr)
	}
	var head struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal(d.out.Bytes(), &head); err != nil || !head.OK {
		d.t.Fatalf("device %s: %s: %v %s", d.name, cmd["op"], err, head.Error)
	}
	if out != nil {
		if err := json.Unmarshal(d.out.Bytes(), out); err != nil {
			d.t.Fatal(err)
		}
	}
}

// syncResult is the answer to a device's sync.
type syncResult struct {
	Push, Pull struct {
		DocsRead    int `json:"docs_read"`
		DocsWritten int `json:"docs_written"`
	}
	Pulled [][2]string `json:"pulled"` // [id, rev]
}

// sync runs one LiveSync one-shot sync (push, and pull with the
// readChunksOnline selector).
func (d *pouchDevice) sync() syncResult {
	d.t.Helper()
	var r syncResult
	d.do(map[string]any{"op": "sync"}, &r)
	return r
}

// load stores docs as they are (new_edits=false): a filled vault.
func (d *pouchDevice) load(docs []json.RawMessage) {
	d.t.Helper()
	d.do(map[string]any{"op": "load", "docs": docs}, nil)
}

// put writes docs as edits: PouchDB chooses their next revisions.
func (d *pouchDevice) put(docs []json.RawMessage) {
	d.t.Helper()
	d.do(map[string]any{"op": "put", "docs": docs}, nil)
}

// docs returns every document of the device (winning revisions).
func (d *pouchDevice) docs() []json.RawMessage {
	d.t.Helper()
	var r struct{ Docs []json.RawMessage }
	d.do(map[string]any{"op": "docs"}, &r)
	return r.Docs
}

// fetchChunks does what the plugin does after a readChunksOnline pull: it
// decodes the device's metadata (with codec, as its transform does),
// fetches every chunk they name that the device lacks with POST
// _all_docs keys, and fails if the relay lacked one. It returns how many
// were fetched.
func (d *pouchDevice) fetchChunks(codec *livesync.Codec) int {
	d.t.Helper()
	have := map[string]bool{}
	var want []string
	docs := d.docs()
	for _, raw := range docs {
		var head struct {
			ID string `json:"_id"`
		}
		json.Unmarshal(raw, &head)
		have[head.ID] = true
	}
	for _, m := range decodeMetas(d.t, docs, codec) {
		for _, c := range m.Children {
			if !have[c] {
				have[c] = true
				want = append(want, c)
			}
		}
	}
	if len(want) == 0 {
		return 0
	}
	var r struct {
		Fetched int
		Missing []string
	}
	d.do(map[string]any{"op": "fetch", "ids": want}, &r)
	if len(r.Missing) > 0 || r.Fetched != len(want) {
		d.t.Fatalf("device %s: fetched %d of %d chunks; the relay lacks %v", d.name, r.Fetched, len(want), r.Missing)
	}
	return r.Fetched
}

// decodeMetas returns the file metadata among docs (remote form), by id.
func decodeMetas(t *testing.T, docs []json.RawMessage, codec *livesync.Codec) map[string]livesync.Meta {
	t.Helper()
	out := map[string]livesync.Meta{}
	for _, raw := range docs {
		doc, err := livesync.ParseDoc(raw)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(doc.ID(), "h:") {
			continue
		}
		if doc, err = codec.DecodeRemote(doc); err != nil {
			t.Fatalf("decode %s: %v", doc.ID(), err)
		}
		if !doc.IsFileDoc() {
			continue
		}
		m, err := livesync.ParseMeta(doc)
		if err != nil {
			t.Fatal(err)
		}
		out[m.ID] = m
	}
	return out
}

// docMap keys documents by id: the revision and the body (canonical JSON,
// without _revisions, which only some reads include).
func docMap(t *testing.T, docs []json.RawMessage) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, raw := range docs {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "_revisions")
		b, _ := json.Marshal(m)
		out[fmt.Sprint(m["_id"])] = string(b)
	}
	return out
}

// sameDocs fails t unless a and b hold the same documents, revisions and
// bodies.
func sameDocs(t *testing.T, what string, a, b map[string]string) {
	t.Helper()
	if len(a) != len(b) {
		t.Errorf("%s: %d documents, %d", what, len(a), len(b))
	}
	for _, id := range slices.Sorted(maps.Keys(a)) {
		if b[id] != a[id] {
			t.Fatalf("%s: %s differs:\n%s\n%s", what, id, a[id], b[id])
		}
	}
}

// remoteDocs encodes a file with codec into its remote documents for a
// device to put (PouchDB chooses the revisions): the chunks the device
// lacks (have), then the metadata, as the next revision of rev.
func remoteDocs(t *testing.T, codec *livesync.Codec, path string, data []byte, rev string, have map[string]bool) (meta json.RawMessage, chunks []json.RawMessage, m livesync.Meta) {
	t.Helper()
	m, cs, err := codec.FileDocs(path, data, 1700000000000, 1700000100000)
	if err != nil {
		t.Fatal(err)
	}
	m.Rev = rev
	enc := func(d livesync.Doc) json.RawMessage {
		rd, err := codec.EncodeRemote(d)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(rd)
		return b
	}
	for _, c := range cs {
		if !have[c.ID] {
			chunks = append(chunks, enc(livesync.ChunkDoc(c)))
		}
	}
	return enc(m.Doc()), chunks, m
}

// testAcceptTwoDevices: device A, a PouchDB filled with the plugin's E2EE
// vault (vault-dump-e2ee.json: E2EE V2, path obfuscation), syncs to the
// relay; device B syncs from it and fetches its chunks: both devices and
// the relay hold the same documents and revisions, and the engine decodes
// B's copy back to the input files byte for byte. B edits a note
// (engine-encoded, put into B's PouchDB) and syncs; A's next sync has it.
func testAcceptTwoDevices(t *testing.T, srv couchFactory) {
	e := srv(t)
	d := readVaultDump(t)
	db := openDB(t, srv, "vault", false, nil) // the database the relay created at first start
	ctx := ctxT(t)
	// What the handshake of the device that made the vault wrote.
	for _, l := range d.Remote.LocalDocs {
		var head struct {
			ID string `json:"_id"`
		}
		json.Unmarshal(l, &head)
		if err := db.PutLocal(ctx, strings.TrimPrefix(head.ID, "_local/"), l); err != nil {
			t.Fatal(err)
		}
	}
	var vault []json.RawMessage
	for _, r := range d.Remote.AllDocs {
		vault = append(vault, r.Doc)
	}
	a, b := startDevice(t, e, "vault", "A"), startDevice(t, e, "vault", "B")
	a.load(vault)
	if r := a.sync(); r.Push.DocsWritten != len(vault) || r.Pull.DocsWritten != 0 {
		t.Fatalf("A pushed %d of %d documents, pulled %d", r.Push.DocsWritten, len(vault), r.Pull.DocsWritten)
	}
	codec := handshakeCodec(t, db, "accept-reader", dumpSettings(t, d, d.FixedValues.Passphrase))
	r := b.sync()
	metas := decodeMetas(t, b.docs(), codec)
	if r.Pull.DocsWritten == 0 || len(metas) != len(d.Files) {
		t.Fatalf("B pulled %d documents, %d file metadata; the vault has %d files", r.Pull.DocsWritten, len(metas), len(d.Files))
	}
	for _, p := range r.Pulled {
		if strings.HasPrefix(p[0], "h:") {
			t.Fatalf("B pulled chunk %s despite readChunksOnline", p[0])
		}
	}
	t.Logf("B pulled %d documents and fetched %d chunks", r.Pull.DocsWritten, b.fetchChunks(codec))
	want := docMap(t, vault)
	sameDocs(t, "vault and device B", want, docMap(t, b.docs()))
	sameDocs(t, "vault and device A", want, docMap(t, a.docs()))
	sameDocs(t, "vault and the relay", want, docMap(t, dbDocs(t, db)))
	files, _ := decodeDocs(t, b.docs(), codec)
	inputs := dumpInputs(t, d)
	sameFiles(t, files, inputs)

	// B edits a note.
	path := slices.Sorted(maps.Keys(inputs))[0]
	for _, p := range slices.Sorted(maps.Keys(inputs)) {
		if strings.HasSuffix(p, ".md") {
			path = p
			break
		}
	}
	edited := append(append([]byte{}, inputs[path]...), "\n\nEdited on device B, through the relay.\n"...)
	have := map[string]bool{}
	bDocs := docMap(t, b.docs())
	for id := range bDocs {
		have[id] = true
	}
	id := codec.DocID(path)
	var cur struct {
		Rev string `json:"_rev"`
	}
	json.Unmarshal([]byte(bDocs[id]), &cur)
	meta, chunks, _ := remoteDocs(t, codec, path, edited, cur.Rev, have)
	if cur.Rev == "" || len(chunks) == 0 {
		t.Fatalf("%s: rev %q, %d new chunks", id, cur.Rev, len(chunks))
	}
	b.put(append(chunks, meta))
	if r := b.sync(); r.Push.DocsWritten != len(chunks)+1 {
		t.Fatalf("B pushed %d documents, want %d", r.Push.DocsWritten, len(chunks)+1)
	}
	r = a.sync()
	if len(r.Pulled) != 1 || r.Pulled[0][0] != id || !strings.HasPrefix(r.Pulled[0][1], "2-") {
		t.Fatalf("A pulled %v, want %s at revision 2", r.Pulled, id)
	}
	// readChunksOnline: A fetches B's new chunks, and only those.
	if n := a.fetchChunks(codec); n != len(chunks) {
		t.Fatalf("A fetched %d chunks, want %d", n, len(chunks))
	}
	inputs[path] = edited
	files, _ = decodeDocs(t, a.docs(), codec)
	sameFiles(t, files, inputs)
	sameDocs(t, "device A and device B", docMap(t, a.docs()), docMap(t, b.docs()))
	sameDocs(t, "device A and the relay", docMap(t, a.docs()), docMap(t, dbDocs(t, db)))
}

// testAcceptDumpReadBack: the public vault-dump-e2ee.json loaded through
// _bulk_docs (new_edits=false) is read back by a LiveSync-configured
// PouchDB client (selector pull, chunks by _all_docs keys): the same
// documents, revisions and bodies, decoding to the input files.
func testAcceptDumpReadBack(t *testing.T, srv couchFactory) {
	d := readVaultDump(t)
	db := loadVaultDump(t, srv, d)
	c := startDevice(t, srv(t), db.Name(), "C")
	r := c.sync()
	codec := handshakeCodec(t, db, "accept-reader", dumpSettings(t, d, d.FixedValues.Passphrase))
	n := c.fetchChunks(codec)
	t.Logf("C pulled %d documents and fetched %d chunks", r.Pull.DocsWritten, n)
	var vault []json.RawMessage
	for _, r := range d.Remote.AllDocs {
		vault = append(vault, r.Doc)
	}
	sameDocs(t, "dump and client", docMap(t, vault), docMap(t, c.docs()))
	files, _ := decodeDocs(t, c.docs(), codec)
	sameFiles(t, files, dumpInputs(t, d))
}

// waitInFeed waits (longpoll) until db's changes feed lists document id
// after sequence since.
func waitInFeed(t *testing.T, db *couchdb.DB, since, id string) {
	t.Helper()
	ctx := ctxT(t)
	for {
		page, err := db.Changes(ctx, engine.ChangesRequest{Since: since, Wait: true})
		if err != nil {
			t.Fatalf("waiting for %s in the feed: %v", id, err)
		}
		for _, c := range page.Results {
			if c.ID == id {
				return
			}
		}
		since = page.LastSeq
	}
}

// dbStatusDoc is the part of one database's entry in GET /status these
// tests read.
type dbStatusDoc struct {
	Name string `json:"name"`
	Mode string `json:"mode"`
	Held []struct {
		Doc           string   `json:"doc"`
		Revisions     []string `json:"revisions"`
		MissingChunks int      `json:"missing_chunks"`
		State         string   `json:"state"`
	} `json:"held"`
	Holdback struct {
		HeldRevisions int    `json:"held_revisions"`
		Holds         uint64 `json:"holds"`
		Released      uint64 `json:"released"`
		Dropped       uint64 `json:"dropped"`
		Unreadable    uint64 `json:"unreadable"`
		Undecodable   uint64 `json:"undecodable"`
	} `json:"holdback"`
}

// dbStatus reads database db's entry in the relay's /status, as the
// admin.
func dbStatus(t testing.TB, e couchEnv, db string) dbStatusDoc {
	t.Helper()
	req, _ := http.NewRequest("GET", e.url+"/status", nil)
	req.SetBasicAuth(e.user, e.password)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s struct{ Databases []dbStatusDoc }
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /status: %d %v", resp.StatusCode, err)
	}
	for _, d := range s.Databases {
		if d.Name == db {
			return d
		}
	}
	t.Fatalf("/status does not list %s", db)
	return dbStatusDoc{}
}

// testAcceptHoldBack: device A pushes only the metadata of a new note (no
// chunks); device B syncs and does not have it, /status shows it held
// with its missing chunks. A pushes a complete note; B syncs again and
// has that one (B's checkpoint is now past the held note's push). A pushes
// the chunks: B's next sync, from its checkpoint, reads exactly the
// released note, whose chunks the relay now serves.
func testAcceptHoldBack(t *testing.T, e couchEnv, db *couchdb.DB, settings livesync.Settings, mode string) {
	codec := handshakeCodec(t, db, "accept-device-a", settings)
	status := func() dbStatusDoc { t.Helper(); return dbStatus(t, e, db.Name()) }
	if s := status(); s.Mode != mode {
		t.Fatalf("hold-back mode %q, want %q", s.Mode, mode)
	}
	a, b := startDevice(t, e, db.Name(), "A"), startDevice(t, e, db.Name(), "B")
	files := map[string][]byte{
		"Notes/First.md":  []byte("# First\nsynced before anything is held\n"),
		"Notes/Held.md":   []byte("# Held\n" + strings.Repeat("pushed metadata-first, its chunks later. ", 40)),
		"Notes/Second.md": []byte("# Second\npushed complete while the other is held\n"),
	}
	note := func(path string) (json.RawMessage, []json.RawMessage, livesync.Meta) {
		return remoteDocs(t, codec, path, files[path], "", nil)
	}
	// A baseline both devices share.
	m1, c1, _ := note("Notes/First.md")
	a.put(append(c1, m1))
	a.sync()
	b.sync()
	b.fetchChunks(codec)

	// A pushes the metadata alone.
	mh, ch, held := note("Notes/Held.md")
	a.put([]json.RawMessage{mh})
	if r := a.sync(); r.Push.DocsWritten != 1 {
		t.Fatalf("A pushed %d documents, want the metadata alone", r.Push.DocsWritten)
	}
	s := status()
	if len(s.Held) != 1 || s.Held[0].Doc != held.ID || s.Held[0].MissingChunks != len(ch) || len(s.Held[0].Revisions) != 1 || s.Holdback.Holds != 1 {
		t.Fatalf("/status: %+v; want %s held, %d chunks missing", s, held.ID, len(ch))
	}
	heldRev := s.Held[0].Revisions[0]
	if r := b.sync(); len(r.Pulled) != 0 {
		t.Fatalf("B pulled %v while the note is held", r.Pulled)
	}
	// B syncs at a later sequence: a complete note pushed meanwhile.
	m2, c2, second := note("Notes/Second.md")
	a.put(append(c2, m2))
	a.sync()
	r := b.sync()
	if len(r.Pulled) != 1 || r.Pulled[0][0] != second.ID {
		t.Fatalf("B pulled %v, want only %s", r.Pulled, second.ID)
	}
	if _, ok := docMap(t, b.docs())[held.ID]; ok {
		t.Fatalf("B has %s while it is held", held.ID)
	}
	b.fetchChunks(codec)

	// A pushes the chunks: the note is released, at a new sequence. The
	// relay releases it after answering the push (the chunks wake its
	// purgatory), and unlists it from /status only after writing it and
	// updating its holding area: the test waits until the relay's feed
	// has it, then until /status no longer lists it (the list is read
	// before the counters, so those count it then).
	before, err := db.Changes(ctxT(t), engine.ChangesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	a.put(ch)
	if r := a.sync(); r.Push.DocsWritten != len(ch) {
		t.Fatalf("A pushed %d chunks, want %d", r.Push.DocsWritten, len(ch))
	}
	waitInFeed(t, db, before.LastSeq, held.ID)
	s = status()
	for deadline := time.Now().Add(30 * time.Second); len(s.Held) != 0 && time.Now().Before(deadline); {
		s = status() // served already, unlisted a moment later
	}
	if len(s.Held) != 0 || s.Holdback.Released != 1 {
		t.Fatalf("/status after the chunks: %+v", s)
	}
	r = b.sync()
	if len(r.Pulled) != 1 || r.Pulled[0] != [2]string{held.ID, heldRev} || r.Pull.DocsRead != 1 {
		t.Fatalf("B's sync after the release read %d documents, pulled %v; want exactly %s %s", r.Pull.DocsRead, r.Pulled, held.ID, heldRev)
	}
	if n := b.fetchChunks(codec); n != len(ch) {
		t.Fatalf("B fetched %d chunks, want %d", n, len(ch))
	}
	got, _ := decodeDocs(t, b.docs(), codec)
	sameFiles(t, got, files)
	// In the relay's feed the released note comes after the note pushed
	// while it was held.
	page, err := db.Changes(ctxT(t), engine.ChangesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	order := map[string]int{}
	for i, c := range page.Results {
		order[c.ID] = i
	}
	if order[held.ID] < order[second.ID] {
		t.Fatalf("the released note is at position %d of the feed, before %s (%d)", order[held.ID], second.ID, order[second.ID])
	}
	sameDocs(t, "device B and the relay", docMap(t, b.docs()), docMap(t, dbDocs(t, db)))
}
