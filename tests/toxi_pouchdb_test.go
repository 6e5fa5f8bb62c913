package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/tests/internal/faultnet"
)

// trySync runs one sync of device d and returns its result, or the
// replication's error (a fault is expected to break it).
func (d *pouchDevice) trySync() (syncResult, string) {
	d.t.Helper()
	if _, err := d.in.Write([]byte(`{"op":"sync"}` + "\n")); err != nil {
		d.t.Fatalf("device %s: %v\n%s", d.name, err, d.stderr)
	}
	scanned := make(chan bool, 1)
	go func() { scanned <- d.out.Scan() }()
	select {
	case ok := <-scanned:
		if !ok {
			d.t.Fatalf("device %s: no answer to sync (%v)\n%s", d.name, d.out.Err(), d.stderr)
		}
	case <-time.After(90 * time.Second):
		d.t.Fatalf("device %s: no answer to sync in 90 s\n%s", d.name, d.stderr)
	}
	var r struct {
		syncResult
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal(d.out.Bytes(), &r); err != nil {
		d.t.Fatal(err)
	}
	if !r.OK {
		return syncResult{}, r.Error
	}
	return r.syncResult, ""
}

// bodyLog counts the documents named in the bodies of POST requests to
// one endpoint (_bulk_docs: {"docs":[{_id…}]}, _bulk_get: {"docs":[{id…}]})
// as they reach the relay, and can inject a fault when the at-th request
// to the endpoint armSuffix arrives.
type bodyLog struct {
	mu    sync.Mutex
	total int
	seen  map[string]int
	// armed, if set, is called (once) when the at-th request of the
	// attempt under way arrives, before the relay sees it.
	armed    func()
	at, reqs int
}

// arm calls f when the at-th request from now arrives.
func (l *bodyLog) arm(at int, f func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.armed, l.at, l.reqs = f, at, 0
}

func newBodyLog(h *faultnet.HTTPProxy, suffix, armSuffix string) *bodyLog {
	l := &bodyLog{seen: map[string]int{}}
	h.OnRequest(func(r *http.Request) {
		if strings.HasSuffix(r.URL.Path, armSuffix) && armSuffix != suffix {
			l.mu.Lock()
			l.reqs++
			var fire func()
			if l.armed != nil && l.reqs == l.at {
				fire, l.armed = l.armed, nil
			}
			l.mu.Unlock()
			if fire != nil {
				go fire()
			}
			return
		}
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, suffix) {
			return
		}
		var body struct {
			Docs []struct {
				ID  string `json:"id"`
				UID string `json:"_id"`
			} `json:"docs"`
		}
		b := readBody(r)
		if json.Unmarshal(b, &body) != nil {
			return // cut off on the way: the relay refuses it too
		}
		l.mu.Lock()
		for _, d := range body.Docs {
			l.total++
			l.seen[d.ID+d.UID]++
		}
		var fire func()
		if armSuffix == suffix {
			l.reqs++
			if l.armed != nil && l.reqs == l.at {
				fire, l.armed = l.armed, nil
			}
		}
		l.mu.Unlock()
		if fire != nil {
			// Not here: the proxy holds its lock while this runs, and
			// changing toxics waits for every connection's data to move.
			go fire()
		}
	})
	return l
}

func (l *bodyLog) counts() (total, distinct int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total, len(l.seen)
}

// heldWatch follows the relay database's feed (directly, not through
// the proxy) and checks, for every note's metadata as it appears, that
// every chunk it names can be read there: a held note must stay
// invisible until its chunks have arrived.
func heldWatch(t *testing.T, db *couchdb.DB, codec *livesync.Codec, stop <-chan struct{}) (done <-chan int) {
	out := make(chan int, 1)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-stop; cancel() }()
	go func() {
		checked, since := 0, ""
		defer func() { out <- checked }()
		for ctx.Err() == nil {
			page, err := db.Changes(ctx, engine.ChangesRequest{Since: since, Wait: since != ""})
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("watching the relay's feed: %v", err)
				}
				return
			}
			for _, c := range page.Results {
				if !strings.HasPrefix(c.ID, "f:") {
					continue
				}
				got, err := db.DocsByID(ctx, []string{c.ID})
				if err != nil || len(got[c.ID]) == 0 {
					if ctx.Err() == nil {
						t.Errorf("reading %s: %v", c.ID, err)
					}
					return
				}
				d, err := livesync.ParseDoc(got[c.ID])
				if err == nil {
					d, err = codec.DecodeRemote(d)
				}
				m, err2 := livesync.ParseMeta(d)
				if err != nil || err2 != nil {
					t.Errorf("%s: %v %v", c.ID, err, err2)
					continue
				}
				docs, err := db.DocsByID(ctx, m.Children)
				if err != nil {
					if ctx.Err() == nil {
						t.Errorf("reading %s's chunks: %v", c.ID, err)
					}
					return
				}
				if len(docs) != len(uniq(m.Children)) {
					t.Errorf("%s is served with %d of its %d chunks on the relay", c.ID, len(docs), len(uniq(m.Children)))
				}
				checked++
			}
			since = page.LastSeq
		}
	}()
	return out
}

func uniq(ids []string) map[string]bool {
	out := map[string]bool{}
	for _, id := range ids {
		out[id] = true
	}
	return out
}

// removeFault takes the toxic "fault" away if it was put in place.
func removeFault(t *testing.T, p *faultnet.Proxy) {
	for _, n := range p.Toxics() {
		if n == "fault" {
			toxiMust(t, p.Remove("fault"))
		}
	}
}

var pouchFaults = []toxiUpstreamFault{
	{"reset_peer", func(t *testing.T, p *faultnet.Proxy) { toxiMust(t, p.ResetPeer("fault", faultnet.Down, 0)) }, removeFault},
	{"request_cut_mid_body", func(t *testing.T, p *faultnet.Proxy) { toxiMust(t, p.CutAfter("fault", faultnet.Up, 6000)) }, removeFault},
	{"server_gone", func(t *testing.T, p *faultnet.Proxy) { p.Cut() }, func(t *testing.T, p *faultnet.Proxy) { toxiMust(t, p.Restore()) }},
	{"black_hole", func(t *testing.T, p *faultnet.Proxy) { toxiMust(t, p.Timeout("fault", faultnet.Up, time.Second)) }, removeFault},
}

// TestToxiPouchDB: real PouchDB 9 devices (tests/pouchdb, LiveSync's
// settings: batches of 25, the readChunksOnline selector) sync with the
// relay binary through toxiproxy (latency 20±10 ms up, slicer down) and,
// behind it, an HTTP proxy that counts the documents in every request.
//
// Device A holds 80 notes, metadata first (so a push that breaks leaves
// notes whose chunks have not arrived: the relay holds them). Its sync is
// broken by each fault in turn (a reset, a request's body cut off, the
// relay gone, a black hole closed after 1 s) and then runs clean.
// Throughout, a watcher on the relay's own feed checks that every note
// appears only with all its chunks readable. Afterwards the relay holds
// A's documents exactly; A sent each document at most once more than
// needed per fault (PouchDB resumes from its checkpoint, re-sending at
// most the batch in flight).
//
// Device B then pulls through the same faults (each striking at the
// first _changes request of an attempt; a request cut after 6 KB misses
// a pull's small requests, so that attempt may complete), then clean, and
// fetches the chunks its metadata names: it holds the notes byte for byte
// and asked for each document at most once more per fault.
func TestToxiPouchDB(t *testing.T) {
	t.Parallel()
	bin := buildRelay(t)
	r := upStartRelay(t, bin, "", "")
	salt, _, err := r.db.Handshake(ctxT(t), couchdb.HandshakeOptions{NodeID: "toxi-writer", Settings: upSettings.TweakValues()})
	if err != nil {
		t.Fatal(err)
	}
	codec, err := livesync.New(livesync.Config{Settings: upSettings, Salt: salt})
	if err != nil {
		t.Fatal(err)
	}
	h := toxiHTTP(t, r.url)
	pushed := newBodyLog(h, "/_bulk_docs", "/_bulk_docs")
	p := toxiProxy(t, hostOf(t, h.URL()))
	toxiMust(t, p.Latency("latency", faultnet.Up, 20*time.Millisecond, 10*time.Millisecond))
	toxiMust(t, p.Slicer("slicer", faultnet.Down, 1024, 512, 50*time.Microsecond))
	env := couchEnv{url: p.URL(), user: "admin", password: r.password}

	var metas, chunks []json.RawMessage
	texts := map[string]string{}
	for i := range 80 {
		text := fmt.Sprintf("# PouchDB %d\n%s", i, strings.Repeat(fmt.Sprintf("a note pushed by a real PouchDB through a bad network, %d\n", i), 50))
		meta, cs, m, _ := upRemoteNote(t, codec, fmt.Sprintf("Pouch/%02d.md", i), text)
		metas, chunks = append(metas, meta), append(chunks, cs...)
		texts[m.ID] = text
	}
	stop := make(chan struct{})
	watched := heldWatch(t, r.db, codec, stop)
	a := startDevice(t, env, "vault", "A")
	a.load(append(metas, chunks...))
	// Each fault strikes at the second _bulk_docs of an attempt: one
	// batch is through, the next is on its way.
	for _, f := range pouchFaults {
		pushed.arm(2, func() { f.inject(t, p) })
		_, errA := a.trySync()
		pushed.arm(0, nil)
		f.heal(t, p)
		if errA == "" {
			t.Errorf("A's sync went through %s", f.name)
		}
		t.Logf("A's sync through %s: %.100s", f.name, errA)
	}
	if _, errA := a.trySync(); errA != "" {
		t.Fatalf("A's sync after the faults: %s", errA)
	}
	want := docMap(t, append(metas, chunks...))
	upWaitInFeed(t, r.db, idsOf(want), 30*time.Second)
	close(stop)
	t.Logf("the watcher checked %d notes as they appeared on the relay", <-watched)
	total, distinct := pushed.counts()
	t.Logf("A pushed %d documents in %d _bulk_docs bodies' worth (%d distinct; %d re-sent)", len(want), total, distinct, total-distinct)
	if distinct != len(want) {
		t.Errorf("%d distinct documents pushed, want %d", distinct, len(want))
	}
	if total-distinct > 25*len(pouchFaults) {
		t.Errorf("A re-sent %d documents, more than a batch (25) per fault", total-distinct)
	}
	relayDocs := docMap(t, dbDocs(t, r.db))
	for id, d := range want {
		if relayDocs[id] == "" {
			t.Errorf("%s is not on the relay", id)
		} else if relayDocs[id] != d {
			t.Errorf("%s differs on the relay", id)
		}
	}

	// Device B pulls through the same faults.
	got := newBodyLog(h, "/_bulk_get", "/_changes")
	b := startDevice(t, env, "vault", "B")
	// Each fault strikes at the first _changes request of an attempt.
	for _, f := range pouchFaults {
		got.arm(1, func() { f.inject(t, p) })
		_, errB := b.trySync()
		got.arm(0, nil)
		f.heal(t, p)
		t.Logf("B's sync through %s: %.100s", f.name, errB)
	}
	if _, errB := b.trySync(); errB != "" {
		t.Fatalf("B's sync after the faults: %s", errB)
	}
	b.fetchChunks(codec)
	gt, gd := got.counts()
	t.Logf("B asked for %d documents (%d distinct, %d asked again)", gt, gd, gt-gd)
	if gt-gd > 25*len(pouchFaults) {
		t.Errorf("B asked again for %d documents, more than a batch (25) per fault", gt-gd)
	}
	for id := range decodeMetas(t, b.docs(), codec) {
		if texts[id] == "" {
			t.Errorf("B holds an unexpected note %s", id)
		}
	}
	bDocs := docMap(t, b.docs())
	for id := range want {
		if bDocs[id] == "" {
			t.Errorf("B lacks %s", id)
		}
	}
}

func idsOf(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for id := range m {
		out = append(out, id)
	}
	return out
}

// readBody reads r's body and puts it back for the proxy to send on.
func readBody(r *http.Request) []byte {
	b, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(b))
	return b
}
