package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/replicate"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/store/boltstore"
)

// tcpProxy forwards 127.0.0.1:<port> to the test server. Cut closes the
// listener and every connection ("the server is killed"); Reopen listens
// on the same address again ("the server is back").
type tcpProxy struct {
	t      *testing.T
	addr   string
	target string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func startProxy(t *testing.T, srv couchFactory) *tcpProxy {
	t.Helper()
	u, err := url.Parse(srv(t).url)
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{t: t, target: u.Host, conns: map[net.Conn]struct{}{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(func() { p.Cut(); p.wg.Wait() })
	return p
}

// URL is the server's URL through the proxy.
func (p *tcpProxy) URL() string { return "http://" + p.addr }

func (p *tcpProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			if p.ln != ln { // cut meanwhile
				p.mu.Unlock()
				c.Close()
				up.Close()
				continue
			}
			p.conns[c], p.conns[up] = struct{}{}, struct{}{}
			p.mu.Unlock()
			p.wg.Add(2)
			pipe := func(dst, src net.Conn) {
				defer p.wg.Done()
				_, _ = io.Copy(dst, src)
				dst.Close()
				src.Close()
				p.mu.Lock()
				delete(p.conns, dst)
				delete(p.conns, src)
				p.mu.Unlock()
			}
			go pipe(up, c)
			go pipe(c, up)
		}
	}()
}

// Cut closes the listener and every open connection.
func (p *tcpProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// Reopen listens on the same address again.
func (p *tcpProxy) Reopen() {
	p.t.Helper()
	var err error
	for range 50 {
		var ln net.Listener
		if ln, err = net.Listen("tcp", p.addr); err == nil {
			p.serve(ln)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.t.Fatalf("reopen the proxy on %s: %v", p.addr, err)
}

// countingEndpoint counts what a replication reads from the remote.
type countingEndpoint struct {
	engine.Endpoint
	mu          sync.Mutex
	bulkGetDocs int      // documents returned by BulkGet
	changesRows int      // rows returned by Changes
	sinces      []string // Since of every Changes request
	beforeGet   func(fetched int)
}

func (c *countingEndpoint) Changes(ctx context.Context, req engine.ChangesRequest) (engine.ChangesPage, error) {
	c.mu.Lock()
	c.sinces = append(c.sinces, req.Since)
	c.mu.Unlock()
	page, err := c.Endpoint.Changes(ctx, req)
	c.mu.Lock()
	c.changesRows += len(page.Results)
	c.mu.Unlock()
	return page, err
}

func (c *countingEndpoint) BulkGet(ctx context.Context, revs []engine.DocRev) ([]json.RawMessage, error) {
	c.mu.Lock()
	n, hook := c.bulkGetDocs, c.beforeGet
	c.mu.Unlock()
	if hook != nil {
		hook(n)
	}
	docs, err := c.Endpoint.BulkGet(ctx, revs)
	c.mu.Lock()
	c.bulkGetDocs += len(docs)
	c.mu.Unlock()
	return docs, err
}

const faultDocs = 2000

func faultDoc(i int) (id, rev, body string) {
	return fmt.Sprintf("doc-%04d", i), fmt.Sprintf("1-%032x", i+1), fmt.Sprintf("body of document %d %s", i, strings.Repeat("x", i%50))
}

// checkLocalDocs checks that every document in st is complete and listed
// exactly once in its changes feed; it returns how many there are.
func checkLocalDocs(t *testing.T, st store.Store) int {
	t.Helper()
	ctx := ctxT(t)
	page, err := st.Changes(ctx, engine.ChangesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, c := range page.Results {
		if seen[c.ID] {
			t.Errorf("%s is listed twice in the local changes feed", c.ID)
		}
		seen[c.ID] = true
		var i int
		if _, err := fmt.Sscanf(c.ID, "doc-%04d", &i); err != nil {
			t.Errorf("unexpected local document %s", c.ID)
			continue
		}
		_, rev, body := faultDoc(i)
		raw, err := st.Get(ctx, c.ID, store.GetOptions{})
		if err != nil {
			t.Errorf("%s is in the changes feed but cannot be read: %v", c.ID, err)
			continue
		}
		var d struct {
			Rev  string `json:"_rev"`
			N    *int   `json:"n"`
			Body string `json:"body"`
		}
		if err := json.Unmarshal(raw, &d); err != nil || d.Rev != rev || d.N == nil || *d.N != i || d.Body != body || len(c.Revs) != 1 || c.Revs[0] != rev {
			t.Errorf("%s is incomplete or altered: %s (feed revs %v)", c.ID, raw, c.Revs)
		}
	}
	all, err := st.AllDocs(ctx, store.AllDocsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(page.Results) {
		t.Errorf("AllDocs lists %d documents, the changes feed %d", len(all), len(page.Results))
	}
	return len(page.Results)
}

// TestFaultServerCutMidPull (the server killed in the middle of a
// pull): a TCP proxy between the adapter and the server is cut while a
// pull of 2,000 documents in batches of 50 runs. The pull returns a
// transport error; the local store (bbolt, closed and reopened) holds only
// complete documents, each once in its changes feed. With the proxy back,
// a second pull resumes from its checkpoint: it lists and fetches only
// what the first one had not written, and the store ends with exactly the
// 2,000 documents.
func TestFaultServerCutMidPull(t *testing.T) { testFaultServerCutMidPull(t, couchServer) }

func testFaultServerCutMidPull(t *testing.T, srv couchFactory) {
	proxy := startProxy(t, srv)
	direct := freshDB(t, srv, nil)
	ctx := ctxT(t)
	docs := make([]json.RawMessage, faultDocs)
	for i := range docs {
		id, rev, body := faultDoc(i)
		docs[i] = raw(fmt.Sprintf(`{"_id":%q,"_rev":%q,"type":"plain","n":%d,"body":%q}`, id, rev, i, body))
	}
	res, err := direct.BulkDocs(ctx, docs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Error != "" {
			t.Fatalf("load %s: %s", r.ID, r.Error)
		}
	}
	db := openDB(t, srv, direct.Name(), false, func(c *couchdb.Config) { c.URL = proxy.URL() })

	path := filepath.Join(t.TempDir(), "vault.db")
	st, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const batch = 50
	cutAt := faultDocs / 2
	first := &countingEndpoint{Endpoint: db}
	var cutOnce sync.Once
	first.beforeGet = func(fetched int) {
		if fetched >= cutAt {
			cutOnce.Do(proxy.Cut)
		}
	}
	// The remote checkpoint after every write: the resume starts from the
	// older of the two checkpoints, and a remote one kept only every ten
	// batches (the default) would lag the local one by up to ten
	// batches, which the listing bound below does not allow for.
	cfg := replicate.Config{Local: st, Remote: first, LocalID: "local", RemoteID: "remote", BatchSize: batch, BatchesLimit: 2,
		RemoteCheckpointBatches: 1}
	r, err := replicate.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Pull(ctx)
	r.Close()
	var ee *engine.Error
	if !errors.As(err, &ee) || ee.Stage != engine.StageTransport || !replicate.IsTransport(err) {
		t.Fatalf("pull with the server cut: %v, want a transport-stage *engine.Error", err)
	}
	t.Logf("cut: %v", err)

	// The store is consistent and survives a reopen.
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err = boltstore.Open(path, boltstore.Options{}); err != nil {
		t.Fatalf("reopen the store after the cut: %v", err)
	}
	defer st.Close()
	have := checkLocalDocs(t, st)
	if have == 0 || have >= faultDocs {
		t.Fatalf("%d documents local after the cut, want some but not all", have)
	}

	// The server is back: the pull resumes from its checkpoint.
	proxy.Reopen()
	second := &countingEndpoint{Endpoint: db}
	cfg.Local, cfg.Remote = st, second
	if r, err = replicate.New(cfg); err != nil {
		t.Fatal(err)
	}
	res2, err := r.Pull(ctx)
	r.Close()
	if err != nil {
		t.Fatalf("pull after the server is back: %v", err)
	}
	missing := faultDocs - have
	t.Logf("first pull: %d fetched, %d local after the cut; second pull: %d changes listed, %d fetched (%d fetched again), %d written",
		first.bulkGetDocs, have, second.changesRows, second.bulkGetDocs, second.bulkGetDocs-missing, res2.Pull.DocsWritten)
	if len(second.sinces) == 0 || second.sinces[0] == "" {
		t.Errorf("the second pull started from the beginning (sinces %v), not from its checkpoint", second.sinces)
	}
	if second.bulkGetDocs != missing {
		t.Errorf("the second pull fetched %d documents, want the %d the first had not written", second.bulkGetDocs, missing)
	}
	// A write takes up to BatchesLimit pages, so the last remote
	// checkpoint before the cut may be that far behind the local one.
	if second.changesRows > missing+3*batch {
		t.Errorf("the second pull listed %d changes, want about the %d left after the checkpoint", second.changesRows, missing)
	}
	if got := checkLocalDocs(t, st); got != faultDocs {
		t.Fatalf("%d documents local after the resumed pull, want %d", got, faultDocs)
	}
}

// TestFaultWrongPassphrase: pulling the plugin's E2EE vault with
// a wrong passphrase fails with a decrypt error that names a document and
// says the passphrase may be wrong.
func TestFaultWrongPassphrase(t *testing.T) { testFaultWrongPassphrase(t, couchServer) }

func testFaultWrongPassphrase(t *testing.T, srv couchFactory) {
	d := readVaultDump(t)
	db := loadVaultDump(t, srv, d)
	codec := handshakeCodec(t, db, "go-wrong", dumpSettings(t, d, "not-"+d.FixedValues.Passphrase))
	st := newMemoryStore(t)
	r, err := replicate.New(replicate.Config{Local: st, Remote: replicate.Transform(db, codec), RemoteID: db.Name()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, err = r.Pull(ctxT(t))
	var ee *engine.Error
	if !errors.Is(err, engine.ErrDecrypt) || !errors.As(err, &ee) {
		t.Fatalf("pull with a wrong passphrase: %v, want an *engine.Error wrapping ErrDecrypt", err)
	}
	known := map[string]bool{}
	for _, r := range d.Remote.AllDocs {
		known[r.ID] = true
	}
	if !known[ee.DocID] || !strings.Contains(err.Error(), ee.DocID) {
		t.Errorf("error does not name a document of the vault: %v", err)
	}
	if !strings.Contains(err.Error(), "passphrase") {
		t.Errorf("error does not say the passphrase may be wrong: %v", err)
	}
	if strings.Contains(err.Error(), d.FixedValues.Passphrase) {
		t.Errorf("error contains the passphrase: %v", err)
	}
	t.Logf("wrong passphrase: %v", err)
}

// TestFaultLockedRemote: a remote locked by another device
// (milestone locked, this node not accepted) refuses the handshake with
// negotiate.ErrNodeLocked and a message that says what to do; a tweak
// mismatch does the same with *negotiate.TweakMismatchError.
func TestFaultLockedRemote(t *testing.T) { testFaultLockedRemote(t, couchServer) }

func testFaultLockedRemote(t *testing.T, srv couchFactory) {
	db := freshDB(t, srv, nil)
	ctx := ctxT(t)
	if _, _, err := db.Handshake(ctx, couchdb.HandshakeOptions{NodeID: "owner", Settings: tweaks(t, false)}); err != nil {
		t.Fatal(err)
	}
	rawM, err := db.GetLocal(ctx, "obsydian_livesync_milestone")
	if err != nil {
		t.Fatal(err)
	}
	m, err := negotiate.ParseMilestone(rawM)
	if err != nil {
		t.Fatal(err)
	}
	m.Lock("owner", negotiate.CouchDBChunkRange, false)
	b, _ := json.Marshal(m)
	if err := db.PutLocal(ctx, "obsydian_livesync_milestone", b); err != nil {
		t.Fatal(err)
	}
	lockedRaw, _ := db.GetLocal(ctx, "obsydian_livesync_milestone")
	_, _, err = db.Handshake(ctx, couchdb.HandshakeOptions{NodeID: "newcomer", Settings: tweaks(t, false)})
	if !errors.Is(err, negotiate.ErrNodeLocked) || !errors.Is(err, negotiate.ErrLocked) {
		t.Fatalf("locked remote: %v, want ErrNodeLocked", err)
	}
	for _, advice := range []string{"fetch the rebuilt remote", "empty local database", "unlock the remote"} {
		if !strings.Contains(err.Error(), advice) {
			t.Errorf("locked remote: message %q does not say %q", err, advice)
		}
	}
	t.Logf("locked: %v", err)
	// The refused node left no trace in the milestone.
	if raw, _ := db.GetLocal(ctx, "obsydian_livesync_milestone"); !bytes.Equal(raw, lockedRaw) {
		t.Errorf("the refused handshake rewrote the milestone")
	}

	_, _, err = db.Handshake(ctx, couchdb.HandshakeOptions{NodeID: "owner", Settings: tweaks(t, true)})
	var tm *negotiate.TweakMismatchError
	if !errors.As(err, &tm) || !strings.Contains(err.Error(), "adopt the remote's preferred settings") || !strings.Contains(err.Error(), tm.Diffs[0].Key) {
		t.Fatalf("tweak mismatch: %v, want a *TweakMismatchError naming the setting and what to do", err)
	}
	t.Logf("mismatch: %v", err)
}

// sizeEndpoint records the sizes of BulkDocs calls and their 413s.
type sizeEndpoint struct {
	engine.Endpoint
	mu       sync.Mutex
	tooLarge int   // calls refused with ErrTooLarge
	written  []int // documents per successful call
}

func (s *sizeEndpoint) BulkDocs(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	res, err := s.Endpoint.BulkDocs(ctx, docs)
	s.mu.Lock()
	defer s.mu.Unlock()
	if errors.Is(err, engine.ErrTooLarge) {
		s.tooLarge++
	} else if err == nil {
		s.written = append(s.written, len(docs))
	}
	return res, err
}

// TestFaultPushTooLarge (a 413): with the server's request limit
// lowered (as TestCouchDBTooLarge does), a push of 60 small documents in
// batches of 25 is refused with 413 and replicate's fallback shrinks the
// batches until they pass; a single document larger than the limit ends
// the push with engine.ErrTooLarge and a message that says to send less.
func TestFaultPushTooLarge(t *testing.T) { testFaultPushTooLarge(t, couchServer) }

func testFaultPushTooLarge(t *testing.T, srv couchFactory) {
	db := freshDB(t, srv, nil)
	ctx := ctxT(t)
	st := newMemoryStore(t)
	const n = 60
	for i := range n {
		if _, err := st.Put(ctx, raw(fmt.Sprintf(`{"_id":"small-%02d","type":"plain","body":%q}`, i, strings.Repeat("y", 250)))); err != nil {
			t.Fatal(err)
		}
	}
	old, ok := setServerConfig(t, srv, "couchdb", "max_document_size", "4000")
	if !ok {
		t.Fatal("the server's configuration cannot be changed; 413 not tested")
	}
	oldReq, okReq := setServerConfig(t, srv, "chttpd", "max_http_request_size", "4000")
	t.Cleanup(func() {
		if old == "" {
			old = "50000000" // engine/FORMAT.md §5.1
		}
		setServerConfig(t, srv, "couchdb", "max_document_size", old)
		if okReq && oldReq != "" {
			setServerConfig(t, srv, "chttpd", "max_http_request_size", oldReq)
		}
	})

	remote := &sizeEndpoint{Endpoint: db}
	r, err := replicate.New(replicate.Config{Local: st, Remote: remote, RemoteID: db.Name(), BatchSize: 25, BatchesLimit: 25})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	res, err := r.Push(ctx)
	if err != nil {
		t.Fatalf("push with a lowered request limit: %v, want the batches shrunk until they pass", err)
	}
	t.Logf("413s: %d; documents per accepted request: %v", remote.tooLarge, remote.written)
	if remote.tooLarge == 0 {
		t.Fatal("no 413: the limit did not apply")
	}
	for _, k := range remote.written {
		if k >= 25 {
			t.Errorf("a request of %d documents passed after the 413s, want smaller batches", k)
		}
	}
	if info, err := db.Info(ctx); err != nil || info.DocCount != n || res.Push.DocsWritten != n {
		t.Fatalf("server has %d documents (err %v), push wrote %d, want %d", info.DocCount, err, res.Push.DocsWritten, n)
	}

	// One document larger than the limit cannot pass at any batch size.
	if _, err := st.Put(ctx, raw(fmt.Sprintf(`{"_id":"huge","type":"plain","body":%q}`, strings.Repeat("z", 10000)))); err != nil {
		t.Fatal(err)
	}
	_, err = r.Push(ctx)
	if !errors.Is(err, engine.ErrTooLarge) {
		t.Fatalf("push of an oversized document: %v, want ErrTooLarge", err)
	}
	if !strings.Contains(err.Error(), "send fewer or smaller") {
		t.Errorf("message does not say what to do: %v", err)
	}
	t.Logf("too large: %v", err)
}
