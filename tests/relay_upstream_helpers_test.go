package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/adapters/minio"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/journalsync"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/store"
)

// The helpers of the relay upstream tests: a
// livesync-relay binary run with a configuration file whose database has
// upstreams on the test CouchDB server and the test S3 server.

const upPassphrase = "relay upstream test passphrase"

// upSettings are the vault settings of the tests: E2EE with path
// obfuscation, what the relay assumes without a milestone.
var upSettings = livesync.Settings{Passphrase: upPassphrase, Encrypt: true, PathObfuscation: true}

// upRelay is a running relay with upstreams.
type upRelay struct {
	p        *relayProcess
	url      string
	password string // the admin's
	db       *couchdb.DB
}

// upStartRelay starts bin with a configuration: a data folder, an admin
// "admin", [purgatory] and the database "vault" with the test passphrase
// and the upstream tables ups. env adds environment variables (the
// upstreams' secrets).
func upStartRelay(t *testing.T, bin, purgatory, ups string, env ...string) *upRelay {
	t.Helper()
	wd := t.TempDir()
	conf := fmt.Sprintf("data_dir = %q\n\n[[users]]\nname = \"admin\"\npassword_env = \"LSGO_UP_ADMIN\"\nadmin = true\n\n[purgatory]\n%s\n\n"+
		"[[databases]]\nname = \"vault\"\npassphrase_env = \"LSGO_UP_PASSPHRASE\"\n\n%s", filepath.Join(wd, "data"), purgatory, ups)
	if err := os.WriteFile(filepath.Join(wd, "relay.toml"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	r := &upRelay{password: hexToken(t)}
	env = append(env, "LSGO_UP_ADMIN="+r.password, "LSGO_UP_PASSPHRASE="+upPassphrase)
	r.p = startRelayOpts(t, bin, wd, relayStart{env: env, args: []string{"--config", filepath.Join(wd, "relay.toml"), "--listen", "127.0.0.1:0"}, maxLine: 1 << 20, graceful: true})
	r.url = r.p.url
	db, err := couchdb.New(couchdb.Config{URL: r.url, Database: "vault", User: "admin", Password: r.password})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	r.db = db
	return r
}

// upCouch is the TOML of a CouchDB upstream on the test server.
func upCouch(e couchEnv, name, rawURL, database, mode, passwordEnv string) string {
	return fmt.Sprintf("[[databases.upstreams]]\nname = %q\nkind = \"couchdb\"\nurl = %q\ndatabase = %q\nuser = %q\npassword_env = %q\nmode = %q\n\n",
		name, rawURL, database, e.user, passwordEnv, mode)
}

// upBucket is the TOML of a bucket upstream on the test S3 server.
func upBucket(e s3Env, b *minio.Bucket, name, mode, secretEnv, extra string) string {
	ep := e.hostPort()
	tlsLine := ""
	if e.secure {
		ep = "https://" + ep
		tlsLine = "ca_file = " + jsonString(os.Getenv("LIVESYNC_TEST_S3_CA_FILE")) + "\n"
	}
	return fmt.Sprintf("[[databases.upstreams]]\nname = %q\nkind = \"s3\"\nendpoint = %q\nbucket = %q\nprefix = %q\nregion = %q\naccess_key = %q\nsecret_key_env = %q\nmode = %q\npoll_interval = \"300ms\"\n%s%s\n\n",
		name, ep, b.Name(), b.Prefix(), e.region, e.access, secretEnv, mode, tlsLine, extra)
}

// upStatus is the part of the relay's /status these tests read.
type upStatus struct {
	Databases []struct {
		Name string `json:"name"`
		Mode string `json:"mode"`
		Held []struct {
			Doc    string `json:"doc"`
			Source string `json:"source"`
		} `json:"held"`
		Upstreams []upUpstream `json:"upstreams"`
		Hunt      struct {
			Documents int    `json:"documents"`
			Waiting   int    `json:"waiting"`
			Completed uint64 `json:"completed"`
			Limits    struct {
				MaxInFlight   int     `json:"max_in_flight"`
				MaxPerWindow  int     `json:"max_per_window"`
				WindowSeconds float64 `json:"window_seconds"`
			} `json:"limits"`
		} `json:"hunt"`
	} `json:"databases"`
}

type upUpstream struct {
	Name        string     `json:"name"`
	Kind        string     `json:"kind"`
	Mode        string     `json:"mode"`
	Location    string     `json:"location"`
	State       string     `json:"state"`
	Boundary    string     `json:"boundary"`
	LastSeq     string     `json:"last_seq"`
	Lag         int        `json:"lag"`
	DocsPulled  uint64     `json:"docs_pulled"`
	DocsPushed  uint64     `json:"docs_pushed"`
	Errors      uint64     `json:"errors"`
	LastError   string     `json:"last_error"`
	LastSuccess *time.Time `json:"last_success"`
	Hunt        struct {
		ThrottleKey string `json:"throttle_key"`
		CanFetch    bool   `json:"can_fetch"`
		Requests    uint64 `json:"requests"`
		Found       uint64 `json:"found"`
		Missing     uint64 `json:"missing"`
		Failed      uint64 `json:"failed"`
		Chunks      uint64 `json:"chunks"`
		MaxInFlight int    `json:"max_in_flight"`
		MaxInWindow int    `json:"max_in_window"`
	} `json:"hunt"`
}

// get reads path as the admin.
func (r *upRelay) get(t *testing.T, path string) []byte {
	t.Helper()
	req, _ := http.NewRequest("GET", r.url+path, nil)
	req.SetBasicAuth("admin", r.password)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return b
}

// status reads /status: the database "vault" and its upstreams by name.
func (r *upRelay) status(t *testing.T) (upStatus, map[string]upUpstream) {
	t.Helper()
	var s upStatus
	if err := json.Unmarshal(r.get(t, "/status"), &s); err != nil || len(s.Databases) != 1 {
		t.Fatalf("/status: %v %+v", err, s)
	}
	ups := map[string]upUpstream{}
	for _, u := range s.Databases[0].Upstreams {
		ups[u.Name] = u
	}
	return s, ups
}

// waitUpstream polls /status (every 50 ms, 60 s at most) until ok holds
// for the named upstream.
func (r *upRelay) waitUpstream(t *testing.T, name string, ok func(upUpstream) bool) upUpstream {
	t.Helper()
	var last upUpstream
	upPoll(t, "upstream "+name, func() bool {
		_, ups := r.status(t)
		last = ups[name]
		return ok(last)
	}, func() string { return fmt.Sprintf("%+v\n%s", last, r.p.output()) })
	return last
}

func upLive(u upUpstream) bool { return u.State == "live" }

// upPoll checks ok every 50 ms until it holds, 60 s at most.
func upPoll(t *testing.T, what string, ok func() bool, detail func() string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !ok() {
		if time.Now().After(deadline) {
			d := ""
			if detail != nil {
				d = detail()
			}
			t.Fatalf("timed out waiting for %s; %s", what, d)
		}
		<-tick.C
	}
}

// upWaitInFeed waits with longpolls until every id is in db's feed.
func upWaitInFeed(t *testing.T, db *couchdb.DB, ids []string, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	since := ""
	for len(want) > 0 {
		page, err := db.Changes(ctx, engine.ChangesRequest{Since: since, Wait: since != ""})
		if err != nil {
			t.Fatalf("waiting for %d documents in %s's feed: %v", len(want), db.Name(), err)
		}
		for _, c := range page.Results {
			delete(want, c.ID)
		}
		since = page.LastSeq
	}
}

// upRemoteNote returns a note's metadata and chunks in the remote form
// codec writes, with the first revisions a replicator sends.
func upRemoteNote(t *testing.T, codec *livesync.Codec, path, text string) (meta json.RawMessage, chunks []json.RawMessage, m livesync.Meta, plain []engine.Chunk) {
	t.Helper()
	m, cs, err := codec.FileDocs(path, []byte(text), 1700000000000, 1700000000000)
	if err != nil {
		t.Fatal(err)
	}
	meta, chunks = relayMainNote(t, codec, path, text)
	for _, c := range cs {
		plain = append(plain, engine.Chunk{ID: c.ID, Data: c.Data})
	}
	var head struct {
		Rev string `json:"_rev"`
	}
	json.Unmarshal(meta, &head)
	m.Rev = head.Rev
	return meta, chunks, m, plain
}

// upPush writes docs with new_edits=false and wants every one accepted.
func upPush(t *testing.T, db *couchdb.DB, docs []json.RawMessage) {
	t.Helper()
	res, err := db.BulkDocs(ctxT(t), docs)
	if err != nil || slices.ContainsFunc(res, func(r engine.BulkDocResult) bool { return r.Error != "" }) {
		t.Fatalf("push to %s: %v %+v", db.Name(), err, res)
	}
}

// upReadNote reads a note from a CouchDB-protocol database with codec:
// its text, or "" while the note or one of its chunks is not there.
func upReadNote(t *testing.T, db *couchdb.DB, codec *livesync.Codec, id string) string {
	t.Helper()
	ctx := ctxT(t)
	docs, err := db.DocsByID(ctx, []string{id})
	if err != nil {
		t.Fatal(err)
	}
	raw, ok := docs[id]
	if !ok {
		return ""
	}
	d, err := livesync.ParseDoc(raw)
	if err != nil {
		t.Fatal(err)
	}
	if d, err = codec.DecodeRemote(d); err != nil {
		t.Fatalf("decode %s: %v", id, err)
	}
	m, err := livesync.ParseMeta(d)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for i := 0; i < len(m.Children); i += 100 {
		ids := m.Children[i:min(i+100, len(m.Children))]
		got, err := db.DocsByID(ctx, ids)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range ids {
			raw, ok := got[c]
			if !ok {
				return ""
			}
			cd, _ := livesync.ParseDoc(raw)
			if cd, err = codec.DecodeRemote(cd); err != nil {
				t.Fatalf("decode chunk %s: %v", c, err)
			}
			ch, err := livesync.ParseChunk(cd)
			if err != nil {
				t.Fatal(err)
			}
			sb.WriteString(ch.Data)
		}
	}
	return sb.String()
}

// upDevice is another device of the vault on the bucket: a plaintext
// memory store and its journal.
type upDevice struct {
	st store.Store
	j  *journalsync.Journal
	jc journalClient
}

func newUpDevice(t *testing.T, b *minio.Bucket, node string) *upDevice {
	t.Helper()
	jc := connectJournal(t, b, node, upSettings)
	st := newMemoryStore(t)
	j := newJournal(t, journalsync.Config{Local: st, Remote: b, Cipher: jc.cipher, Epoch: jc.epoch})
	return &upDevice{st: st, j: j, jc: jc}
}

// readNote receives and returns a note's text ("" while it is not all
// there).
func (d *upDevice) readNote(t *testing.T, id string) string {
	t.Helper()
	ctx := ctxT(t)
	if _, err := d.j.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	raw, err := d.st.Get(ctx, id, store.GetOptions{})
	if err != nil {
		return ""
	}
	doc, _ := livesync.ParseDoc(raw)
	m, err := livesync.ParseMeta(doc)
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.st.GetChunks(ctx, m.Children)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for _, c := range m.Children {
		ch, ok := got[c]
		if !ok {
			return ""
		}
		sb.WriteString(ch.Data)
	}
	return sb.String()
}

// sendChunks puts plaintext chunks in the device's store and sends them.
func (d *upDevice) sendChunks(t *testing.T, chunks []engine.Chunk) {
	t.Helper()
	if err := d.st.PutChunks(ctxT(t), chunks); err != nil {
		t.Fatal(err)
	}
	if _, err := d.j.Send(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// upProxy forwards TCP connections to target until closed: an upstream
// server that can be taken down for good (close), or for a while
// (setDown: the same address comes back).
type upProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	down  bool
	conns []net.Conn
}

func newUpProxy(t *testing.T, target string) *upProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &upProxy{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			down := p.down
			p.mu.Unlock()
			if down {
				c.Close()
				continue
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go func() { io.Copy(s, c); s.Close() }()
			go func() { io.Copy(c, s); c.Close() }()
		}
	}()
	t.Cleanup(p.close)
	return p
}

func (p *upProxy) url() string { return "http://" + p.ln.Addr().String() }

// close stops accepting and cuts every connection: the port is closed.
func (p *upProxy) close() {
	p.ln.Close()
	p.setDown(true)
}

// setDown(true) cuts every connection and refuses new ones until
// setDown(false): a server that goes away and comes back on the same
// address.
func (p *upProxy) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		for _, c := range p.conns {
			c.Close()
		}
		p.conns = nil
	}
}

// upHostPort is the host:port of a URL.
func upHostPort(rawURL string) string {
	return strings.TrimPrefix(strings.TrimPrefix(rawURL, "https://"), "http://")
}
