package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/engine/replicate"
	"github.com/livesync-go/livesync-go/engine/store/boltstore"
	"github.com/livesync-go/livesync-go/tests/internal/faultnet"
)

const toxiDocs = 1000

// loadFaultDocs writes the first n faultDoc documents into a fresh
// database on the test server (directly, not through a proxy).
func loadFaultDocs(t *testing.T, n int) *couchdb.DB {
	t.Helper()
	direct := freshDB(t, couchServer, nil)
	docs := make([]json.RawMessage, n)
	for i := range docs {
		id, rev, body := faultDoc(i)
		docs[i] = raw(fmt.Sprintf(`{"_id":%q,"_rev":%q,"type":"plain","n":%d,"body":%q}`, id, rev, i, body))
	}
	res, err := direct.BulkDocs(ctxT(t), docs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Error != "" {
			t.Fatalf("load %s: %s", r.ID, r.Error)
		}
	}
	return direct
}

// toxiFault is one way the network fails in the middle of a pull: inject
// breaks it, heal undoes it; transport says whether the pull must end
// with a transport-stage error (an HTTP 5xx is the server's answer).
type toxiFault struct {
	name      string
	inject    func(t *testing.T, p *faultnet.Proxy, h *faultnet.HTTPProxy)
	heal      func(t *testing.T, p *faultnet.Proxy, h *faultnet.HTTPProxy)
	transport bool
}

func isBulkGet(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/_bulk_get") }

var pullFaults = []toxiFault{
	{"reset_peer", func(t *testing.T, p *faultnet.Proxy, _ *faultnet.HTTPProxy) {
		toxiMust(t, p.ResetPeer("fault", faultnet.Down, 0))
	}, func(t *testing.T, p *faultnet.Proxy, _ *faultnet.HTTPProxy) { toxiMust(t, p.Remove("fault")) }, true},
	{"cut_mid_body", func(t *testing.T, p *faultnet.Proxy, _ *faultnet.HTTPProxy) {
		toxiMust(t, p.CutAfter("fault", faultnet.Down, 2048))
	}, func(t *testing.T, p *faultnet.Proxy, _ *faultnet.HTTPProxy) { toxiMust(t, p.Remove("fault")) }, true},
	{"black_hole", func(t *testing.T, p *faultnet.Proxy, _ *faultnet.HTTPProxy) {
		toxiMust(t, p.Timeout("fault", faultnet.Up, time.Second))
	}, func(t *testing.T, p *faultnet.Proxy, _ *faultnet.HTTPProxy) { toxiMust(t, p.Remove("fault")) }, true},
	{"5xx_burst", func(t *testing.T, _ *faultnet.Proxy, h *faultnet.HTTPProxy) {
		h.Burst(3, isBulkGet, 503, 500, 502)
	}, func(t *testing.T, _ *faultnet.Proxy, h *faultnet.HTTPProxy) { h.Stop() }, false},
}

// TestToxiPullResume: a pull of 1,000 documents in batches of 50 runs
// through toxiproxy (latency 20±10 ms up, slicer down: answers in small
// TCP writes) and, behind it, the 5xx proxy. Half way, a fault is
// injected: a connection reset, an answer cut off mid-body, a black hole
// closed after 1 s, or a burst of 503/500/502 on _bulk_get. The pull
// fails (with a transport error for the TCP faults); the bbolt store,
// reopened, holds only complete documents, each once. With the fault
// healed, a second pull resumes from its checkpoint: it fetches exactly
// the documents the first had not written (no re-sent document) and lists
// at most three batches more than that; the store ends with all 1,000.
func TestToxiPullResume(t *testing.T) {
	t.Parallel()
	direct := loadFaultDocs(t, toxiDocs)
	e := couchServer(t)
	for _, f := range pullFaults {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			p := toxiProxy(t, hostOf(t, e.url))
			toxiMust(t, p.Latency("latency", faultnet.Up, 20*time.Millisecond, 10*time.Millisecond))
			toxiMust(t, p.Slicer("slicer", faultnet.Down, 1024, 512, 50*time.Microsecond))
			// The 5xx proxy is in front of toxiproxy only for the 5xx
			// fault: in front of a TCP fault it would answer 502.
			h := toxiHTTP(t, p.URL())
			url := p.URL()
			if !f.transport {
				url = h.URL()
			}
			db := openDB(t, couchServer, direct.Name(), false, func(c *couchdb.Config) { c.URL = url })
			testToxiPullResume(t, db, f, p, h)
		})
	}
}

func testToxiPullResume(t *testing.T, db *couchdb.DB, f toxiFault, p *faultnet.Proxy, h *faultnet.HTTPProxy) {
	ctx := ctxT(t)
	path := filepath.Join(t.TempDir(), "vault.db")
	st, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const batch = 50
	first := &countingEndpoint{Endpoint: db}
	var once sync.Once
	first.beforeGet = func(fetched int) {
		if fetched >= toxiDocs/2 {
			once.Do(func() { f.inject(t, p, h) })
		}
	}
	// Each case has its own replication id (the subtests share the
	// database, and so the remote checkpoint's document).
	cfg := replicate.Config{Local: st, Remote: first, LocalID: "local-" + f.name, RemoteID: "remote", BatchSize: batch, BatchesLimit: 2,
		RemoteCheckpointBatches: 1}
	r, err := replicate.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = r.Pull(ctx)
	r.Close()
	if err == nil {
		t.Fatalf("the pull went through the %s fault", f.name)
	}
	if f.transport && !replicate.IsTransport(err) {
		t.Fatalf("pull through %s: %v, want a transport-stage error", f.name, err)
	}
	t.Logf("%s after %v: %v", f.name, time.Since(start).Round(time.Millisecond), err)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err = boltstore.Open(path, boltstore.Options{}); err != nil {
		t.Fatalf("reopen the store after the fault: %v", err)
	}
	defer st.Close()
	have := checkLocalDocs(t, st)
	if have == 0 || have >= toxiDocs {
		t.Fatalf("%d documents local after the fault, want some but not all", have)
	}

	f.heal(t, p, h)
	second := &countingEndpoint{Endpoint: db}
	cfg.Local, cfg.Remote = st, second
	if r, err = replicate.New(cfg); err != nil {
		t.Fatal(err)
	}
	if _, err = r.Pull(ctx); err != nil {
		t.Fatalf("pull after the fault healed: %v", err)
	}
	r.Close()
	missing := toxiDocs - have
	t.Logf("resumed: %d local before, %d listed, %d fetched; %d requests through the HTTP proxy, %d answered 5xx",
		have, second.changesRows, second.bulkGetDocs, h.Requests(), h.Failed())
	if len(second.sinces) == 0 || second.sinces[0] == "" {
		t.Errorf("the second pull started from the beginning, not from its checkpoint")
	}
	if second.bulkGetDocs != missing {
		t.Errorf("the second pull fetched %d documents, want the %d the first had not written (re-sent: %d)", second.bulkGetDocs, missing, second.bulkGetDocs-missing)
	}
	if second.changesRows > missing+3*batch {
		t.Errorf("the second pull listed %d changes, want at most %d", second.changesRows, missing+3*batch)
	}
	if got := checkLocalDocs(t, st); got != toxiDocs {
		t.Fatalf("%d documents local after the resumed pull, want %d", got, toxiDocs)
	}
}
