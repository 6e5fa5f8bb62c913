package tests

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
)

// Load test sizes. LIVESYNC_LOAD_NOTES and LIVESYNC_LOAD_CLIENTS override
// them; the full size is LIVESYNC_LOAD_NOTES=10000 with 20 clients
// (about 7 minutes on 2 cores; the default takes under a minute).
const (
	loadNotesDefault   = 1000
	loadClientsDefault = 20
	// A writer pushes one live note a tick during the pull, its metadata
	// first and its chunks loadLag ticks later, so that holds happen
	// while clients pull and watch.
	loadTick = 200 * time.Millisecond
	loadLag  = 4
	// The writer goes on for this many notes after every client caught
	// up, so live clients see notes held and released.
	loadLiveAfter = 20
)

// loadResult is what one livesync-load.mjs process writes to its --out
// file.
type loadResult struct {
	Clients []struct {
		Client        int              `json:"client"`
		Docs          int              `json:"docs"`
		Incomplete    int              `json:"incomplete"`
		SHA256        string           `json:"sha256"`
		Fetched       int              `json:"fetched"`
		FetchRequests int              `json:"fetchRequests"`
		Violations    []map[string]any `json:"violations"`
		Seen          map[string]int64 `json:"seen"`
	} `json:"clients"`
	Latencies map[string][]float64 `json:"latencies"` // ms, by kind
}

// TestRelayLoad is the relay's load test, against the relay
// binary: a vault of LIVESYNC_LOAD_NOTES engine-encoded E2EE notes of
// about 1 KiB (default 1000; the full size is 10000) is pushed, then
// LIVESYNC_LOAD_CLIENTS real PouchDB 9 clients (default 20, in
// LIVESYNC_LOAD_PROCESSES node processes running
// tests/pouchdb/livesync-load.mjs, default one per CPU) pull it at once with
// LiveSync's settings and stay in LiveSync's continuous mode, while a
// writer keeps pushing new notes metadata-first (chunks a few ticks
// later), so that the relay holds them. It checks that
//
//   - every client ends with the same documents and revisions as the
//     relay, each metadata document's chunks all present;
//   - no client was ever served a metadata document the relay lacked a
//     chunk of: each client checks every pulled batch against the relay
//     (a chunk neither it nor the relay has is a violation), and no client
//     saw a live note before the writer started sending its chunks;
//   - every live note was held and released (the relay's /status).
//
// It logs the throughput (documents the clients stored by the end of
// their catch-up, per second of the slowest catch-up) and the p50/p99 request latency, client-side and
// from the relay's livesync_relay_http_request_duration_seconds.
func TestRelayLoad(t *testing.T) {
	pouchClient(t)
	notes := loadEnvInt(t, "LIVESYNC_LOAD_NOTES", loadNotesDefault)
	clients := loadEnvInt(t, "LIVESYNC_LOAD_CLIENTS", loadClientsDefault)
	bin := buildRelay(t)
	p := startRelayProcess(t, bin, t.TempDir())
	e := relayCredentials(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	db, err := couchdb.New(couchdb.Config{URL: e.url, Database: "vault", User: e.user, Password: e.password})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	settings := livesync.Settings{Encrypt: true, Passphrase: "load-test-passphrase"}
	salt, _, err := db.Handshake(ctx, couchdb.HandshakeOptions{NodeID: "load-writer", Settings: settings.TweakValues()})
	if err != nil {
		t.Fatal(err)
	}
	codec, err := livesync.New(livesync.Config{Settings: settings, Salt: salt})
	if err != nil {
		t.Fatal(err)
	}

	// The writer is one device: a chunk it already made (a piece two notes
	// share) is not made again. (Made again, E2EE would give it another
	// ciphertext, so another revision: a conflict on the relay whose winner
	// changes after clients fetched the chunk, which readChunksOnline
	// never fetches again.)
	made := map[string]bool{}
	newChunks := func(cs []json.RawMessage) []json.RawMessage {
		return slices.DeleteFunc(cs, func(c json.RawMessage) bool {
			var head struct {
				ID string `json:"_id"`
			}
			json.Unmarshal(c, &head)
			seen := made[head.ID]
			made[head.ID] = true
			return seen
		})
	}

	// The vault: chunks before the metadata that names them, so nothing
	// of it is held.
	start := time.Now()
	var batch, metas []json.RawMessage
	pushed := 0
	flush := func() {
		docs := append(batch, metas...)
		if len(docs) == 0 {
			return
		}
		loadPush(t, ctx, db, docs)
		pushed += len(docs)
		batch, metas = nil, nil
	}
	for i := range notes {
		m, cs := relayMainNote(t, codec, fmt.Sprintf("Vault/%03d/Note %05d.md", i/100, i), loadNoteText(uint64(i)))
		cs = newChunks(cs)
		batch = append(batch, cs...)
		metas = append(metas, m)
		if len(batch)+len(metas) >= 1000 {
			flush()
		}
	}
	flush()
	t.Logf("vault: %d notes, %d documents, encoded and pushed in %v", notes, pushed, time.Since(start).Round(time.Millisecond))
	before := scrapeDurations(t, e)

	// The clients, in LIVESYNC_LOAD_PROCESSES node processes (default
	// one per CPU: one node process runs its clients on one core).
	procs := min(clients, loadEnvInt(t, "LIVESYNC_LOAD_PROCESSES", runtime.NumCPU()))
	lines := make(chan string, clients+procs)
	var loaders []*loadProcess
	for i := range procs {
		first, n := i*clients/procs, (i+1)*clients/procs-i*clients/procs
		loaders = append(loaders, startLoadProcess(t, ctx, e, first, n, lines))
	}

	// The writer, until every client caught up and loadLiveAfter more
	// notes were written.
	type liveNote struct {
		id          string
		chunks      []json.RawMessage
		chunksStart int64 // Unix ms just before the chunks were sent
	}
	var live []*liveNote
	sendChunks := func(n *liveNote) {
		n.chunksStart = time.Now().UnixMilli()
		loadPush(t, ctx, db, n.chunks)
	}
	caught, catchUpMs, stored := 0, 0, 0
	stopAt := -1
	tick := time.NewTicker(loadTick)
	defer tick.Stop()
	for stopAt < 0 || len(live) < stopAt {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the clients exited")
			}
			var i, ms, docs int
			if _, err := fmt.Sscanf(l, "CAUGHTUP %d %d %d", &i, &ms, &docs); err != nil {
				t.Fatalf("clients said %q", l)
			}
			caught++
			catchUpMs = max(catchUpMs, ms)
			stored += docs
			if caught == clients {
				stopAt = len(live) + loadLiveAfter
			}
		case <-tick.C:
			j := len(live)
			m, cs := relayMainNote(t, codec, fmt.Sprintf("Live/%05d.md", j), loadNoteText(1<<32+uint64(j)))
			cs = newChunks(cs)
			var head struct {
				ID string `json:"_id"`
			}
			json.Unmarshal(m, &head)
			live = append(live, &liveNote{id: head.ID, chunks: cs})
			loadPush(t, ctx, db, []json.RawMessage{m})
			if j >= loadLag {
				sendChunks(live[j-loadLag])
			}
		case <-ctx.Done():
			t.Fatalf("timed out: %d of %d clients caught up", caught, clients)
		}
	}
	for _, n := range live[max(0, len(live)-loadLag):] {
		sendChunks(n)
	}
	// Every live note is released: each is in the feed.
	var liveIDs []string
	for _, n := range live {
		liveIDs = append(liveIDs, n.id)
	}
	loadWaitReleased(t, ctx, db, liveIDs)
	var result loadResult
	result.Latencies = map[string][]float64{}
	for _, l := range loaders {
		r := l.finish(t)
		result.Clients = append(result.Clients, r.Clients...)
		for k, v := range r.Latencies {
			result.Latencies[k] = append(result.Latencies[k], v...)
		}
	}
	if len(result.Clients) != clients {
		t.Fatalf("%d results for %d clients", len(result.Clients), clients)
	}

	// Held and released, every live note.
	s := dbStatus(t, e, "vault")
	if len(s.Held) != 0 || s.Holdback.Holds != uint64(len(live)) || s.Holdback.Released != uint64(len(live)) || s.Holdback.Dropped != 0 {
		t.Errorf("/status after the writer: %d held, %d holds, %d released, %d dropped; want %d held and released",
			len(s.Held), s.Holdback.Holds, s.Holdback.Released, s.Holdback.Dropped, len(live))
	}
	// Identical contents.
	relayLines := loadRelayLines(t, ctx, db)
	relayDocs, relaySum := len(relayLines), loadSum(relayLines)
	for _, c := range result.Clients {
		if c.SHA256 != relaySum || c.Docs != relayDocs || c.Incomplete != 0 {
			t.Errorf("client %d: %d documents (sha256 %s), %d with chunks missing; the relay has %d (%s)",
				c.Client, c.Docs, c.SHA256[:12], c.Incomplete, relayDocs, relaySum[:12])
			var b []byte
			for _, l := range loaders {
				if b, err = os.ReadFile(fmt.Sprintf("%s.client-%d", l.out, c.Client)); err == nil {
					break
				}
			}
			got := map[string]bool{}
			for _, l := range strings.Split(string(b), "\n") {
				got[l] = true
			}
			for _, l := range relayLines {
				if !got[l] {
					t.Errorf("client %d lacks %s", c.Client, l)
				}
				delete(got, l)
			}
			for l := range got {
				t.Errorf("client %d has %s, the relay does not", c.Client, l)
			}
		}
		for _, v := range c.Violations {
			t.Errorf("client %d was served %v before the relay had its chunks", c.Client, v)
		}
		for _, n := range live {
			if seen, ok := c.Seen[n.id]; !ok {
				t.Errorf("client %d never saw %s", c.Client, n.id)
			} else if seen < n.chunksStart {
				t.Errorf("client %d saw %s at %d, before its chunks were sent (%d)", c.Client, n.id, seen, n.chunksStart)
			}
		}
	}
	after := scrapeDurations(t, e)

	t.Logf("%d clients caught up with %d notes (%d documents each) in %.1f s: %d documents stored, %.0f docs/s",
		clients, notes, relayDocs, float64(catchUpMs)/1000, stored, float64(stored)/(float64(catchUpMs)/1000))
	t.Logf("writer: %d live notes, metadata first, all held then released; no violation", len(live))
	var all []float64
	for _, v := range result.Latencies {
		all = append(all, v...)
	}
	t.Logf("client-side latency (request until its body is read, longpolls left out): %d requests, p50 %.1f ms, p99 %.1f ms, max %.1f ms",
		len(all), percentile(all, 50), percentile(all, 99), percentile(all, 100))
	for _, k := range slices.Sorted(maps.Keys(result.Latencies)) {
		v := result.Latencies[k]
		t.Logf("  %-20s %7d requests, p50 %6.1f ms, p99 %6.1f ms", k, len(v), percentile(v, 50), percentile(v, 99))
	}
	var rest histogram // every route but the changes feed, whose longpolls wait on purpose
	for _, route := range slices.Sorted(maps.Keys(after)) {
		h := after[route].minus(before[route])
		if h.count == 0 {
			continue
		}
		t.Logf("relay %-24s %7d requests, p50 %s, p99 %s", route, h.count, h.quantile(0.50), h.quantile(0.99))
		if route != "/{db}/_changes" && route != "/metrics" {
			rest = rest.plus(h)
		}
	}
	t.Logf("relay, every route but /{db}/_changes: %d requests, p50 %s, p99 %s", rest.count, rest.quantile(0.50), rest.quantile(0.99))
}

// loadProcess is one livesync-load.mjs process.
type loadProcess struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *bytes.Buffer
	out    string
	done   chan struct{}
}

// startLoadProcess starts n clients numbered from first; their output
// lines (CAUGHTUP) go to lines.
func startLoadProcess(t *testing.T, ctx context.Context, e couchEnv, first, n int, lines chan<- string) *loadProcess {
	t.Helper()
	node, script := pouchClient(t)
	l := &loadProcess{stderr: &bytes.Buffer{}, done: make(chan struct{})}
	l.out = filepath.Join(t.TempDir(), "result.json")
	l.cmd = exec.CommandContext(ctx, node, filepath.Join(filepath.Dir(script), "livesync-load.mjs"),
		"--url", e.url, "--db", "vault", "--out", l.out, "--first", strconv.Itoa(first), "--clients", strconv.Itoa(n),
		"--watch-prefix", "live/")
	l.cmd.Env = append(os.Environ(), "LIVESYNC_TEST_COUCHDB_USER="+e.user, "LIVESYNC_TEST_COUCHDB_PASSWORD="+e.password)
	l.cmd.Stderr = l.stderr
	var err error
	if l.stdin, err = l.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := l.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := l.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.cmd.Process.Kill() })
	go func() {
		defer close(l.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "DONE" {
				return
			}
			lines <- sc.Text()
		}
	}()
	return l
}

// finish tells the clients to finish and returns their results.
func (l *loadProcess) finish(t *testing.T) loadResult {
	t.Helper()
	fmt.Fprintln(l.stdin, "FINISH")
	<-l.done
	if err := l.cmd.Wait(); err != nil {
		t.Fatalf("clients: %v\n%s", err, l.stderr)
	}
	b, err := os.ReadFile(l.out)
	if err != nil {
		t.Fatal(err)
	}
	var r loadResult
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// percentile returns the p-th percentile (nearest rank) of xs.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[max(0, int(math.Ceil(p/100*float64(len(s))))-1)]
}

// loadEnvInt reads a positive integer from the environment.
func loadEnvInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// loadNoteText is a note of about 1 KiB: lines of pseudo-random words
// (seeded by i, so every note differs and chunks are not shared).
func loadNoteText(i uint64) string {
	r := rand.New(rand.NewPCG(i, 0x6c6f6164))
	words := []string{"relay", "vault", "chunk", "note", "sync", "held", "release", "metadata", "device", "pouch",
		"couch", "seq", "batch", "client", "river", "stone", "light", "paper", "garden", "window"}
	var b strings.Builder
	fmt.Fprintf(&b, "# Note %d\n\n", i)
	for b.Len() < 1024 {
		for w := 0; w < 10; w++ {
			b.WriteString(words[r.IntN(len(words))])
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d\n", r.Uint32())
	}
	return b.String()
}

// loadPush writes docs (new_edits=false) and fails on any refusal.
func loadPush(t *testing.T, ctx context.Context, db *couchdb.DB, docs []json.RawMessage) {
	t.Helper()
	res, err := db.BulkDocs(ctx, docs)
	if err != nil {
		t.Fatalf("push: %v", err)
	}
	for _, r := range res {
		if r.Error != "" {
			t.Fatalf("push %s: %s %s", r.ID, r.Error, r.Reason)
		}
	}
}

// loadWaitReleased follows the relay's feed (longpolls) until every id
// is in it: released.
func loadWaitReleased(t *testing.T, ctx context.Context, db *couchdb.DB, ids []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	left := map[string]bool{}
	for _, id := range ids {
		left[id] = true
	}
	since := ""
	for len(left) > 0 {
		page, err := db.Changes(ctx, engine.ChangesRequest{Since: since, Wait: since != ""})
		if err != nil {
			t.Fatalf("waiting for %d notes to be released: %v", len(left), err)
		}
		for _, c := range page.Results {
			delete(left, c.ID)
		}
		since = page.LastSeq
	}
}

// loadRelayLines returns the sorted "id rev" lines of db's documents, as
// livesync-load.mjs writes them.
func loadRelayLines(t *testing.T, ctx context.Context, db *couchdb.DB) []string {
	t.Helper()
	page, err := db.Changes(ctx, engine.ChangesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, c := range page.Results {
		if !c.Deleted {
			lines = append(lines, c.ID+" "+c.Revs[0])
		}
	}
	slices.Sort(lines)
	return lines
}

// loadSum is the sha256 (hex) of lines joined by newlines.
func loadSum(lines []string) string {
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return hex.EncodeToString(sum[:])
}

// histogram is one route's livesync_relay_http_request_duration_seconds.
type histogram struct {
	count   uint64
	buckets []bucket // ascending le
}

type bucket struct {
	le    float64
	count uint64 // cumulative
}

func (h histogram) minus(o histogram) histogram {
	out := histogram{count: h.count - o.count}
	for i, b := range h.buckets {
		var prev uint64
		if i < len(o.buckets) {
			prev = o.buckets[i].count
		}
		out.buckets = append(out.buckets, bucket{b.le, b.count - prev})
	}
	return out
}

func (h histogram) plus(o histogram) histogram {
	if len(h.buckets) == 0 {
		return o
	}
	out := histogram{count: h.count + o.count}
	for i, b := range h.buckets {
		out.buckets = append(out.buckets, bucket{b.le, b.count + o.buckets[i].count})
	}
	return out
}

// quantile returns the upper bound of the bucket holding quantile q.
func (h histogram) quantile(q float64) string {
	rank := uint64(math.Ceil(q * float64(h.count)))
	for _, b := range h.buckets {
		if b.count >= rank {
			if math.IsInf(b.le, 1) {
				return "> the largest bucket"
			}
			return "≤ " + (time.Duration(b.le * float64(time.Second))).String()
		}
	}
	return "?"
}

var bucketLine = regexp.MustCompile(`^livesync_relay_http_request_duration_seconds_bucket\{route="([^"]*)",le="([^"]*)"\} (\d+)`)

// scrapeDurations reads the relay's request duration histograms, by
// route.
func scrapeDurations(t *testing.T, e couchEnv) map[string]histogram {
	t.Helper()
	req, _ := http.NewRequest("GET", e.url+"/metrics", nil)
	req.SetBasicAuth(e.user, e.password)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	out := map[string]histogram{}
	for _, l := range strings.Split(string(body), "\n") {
		m := bucketLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		le, err := strconv.ParseFloat(m[2], 64)
		if m[2] == "+Inf" {
			le, err = math.Inf(1), nil
		}
		n, err2 := strconv.ParseUint(m[3], 10, 64)
		if err != nil || err2 != nil {
			t.Fatalf("metrics line %q", l)
		}
		h := out[m[1]]
		h.buckets = append(h.buckets, bucket{le, n})
		if math.IsInf(le, 1) {
			h.count = n
		}
		out[m[1]] = h
	}
	if len(out) == 0 {
		t.Fatalf("no request durations in /metrics:\n%.2000s", body)
	}
	return out
}
