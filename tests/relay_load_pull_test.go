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
//
// It runs in parallel with the other waiting tests: it asserts no timing,
// and its clients' CPU fills their idle time. Its figures are for a run
// of it alone (-run TestRelayLoad).
func TestRelayLoad(t *testing.T) {
	t.Parallel()
	pouchClient(t)
	l := &loadRun{
		t:       t,
		notes:   loadEnvInt(t, "LIVESYNC_LOAD_NOTES", loadNotesDefault),
		clients: loadEnvInt(t, "LIVESYNC_LOAD_CLIENTS", loadClientsDefault),
		made:    map[string]bool{},
	}
	bin := buildRelay(t)
	p := startRelayProcess(t, bin, t.TempDir())
	l.e = relayCredentials(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	l.ctx = ctx
	l.open()
	defer l.db.Close()

	l.pushVault()
	before := scrapeDurations(t, l.e)
	l.startClients()
	l.write()
	result := l.finish()

	// Held and released, every live note.
	s := dbStatus(t, l.e, "vault")
	if len(s.Held) != 0 || s.Holdback.Holds != uint64(len(l.live)) || s.Holdback.Released != uint64(len(l.live)) || s.Holdback.Dropped != 0 {
		t.Errorf("/status after the writer: %d held, %d holds, %d released, %d dropped; want %d held and released",
			len(s.Held), s.Holdback.Holds, s.Holdback.Released, s.Holdback.Dropped, len(l.live))
	}
	relayDocs := l.checkClients(result)
	after := scrapeDurations(t, l.e)
	l.logStats(result, relayDocs, before, after)
}

// loadRun is one run of TestRelayLoad: the relay, the writer's database
// handle and codec, the clients, and what the writer sent.
type loadRun struct {
	t       *testing.T
	ctx     context.Context
	e       couchEnv
	notes   int
	clients int
	db      *couchdb.DB
	codec   *livesync.Codec
	// made holds the chunks the writer already made: it is one device,
	// and a chunk it already made (a piece two notes share) is not made
	// again. (Made again, E2EE would give it another ciphertext, so
	// another revision: a conflict on the relay whose winner changes
	// after clients fetched the chunk, which readChunksOnline never
	// fetches again.)
	made    map[string]bool
	loaders []*loadProcess
	lines   chan string
	live    []*loadLiveNote
	// The clients' catch-up: how many caught up, the slowest in ms, and
	// the documents they stored by then.
	caught, catchUpMs, stored int
}

// loadLiveNote is a note the writer pushes during the pull, metadata
// first.
type loadLiveNote struct {
	id          string
	chunks      []json.RawMessage
	chunksStart int64 // Unix ms just before the chunks were sent
}

// open opens the vault database on the relay as the writer device and
// makes its E2EE codec.
func (l *loadRun) open() {
	t := l.t
	db, err := couchdb.New(couchdb.Config{URL: l.e.url, Database: "vault", User: l.e.user, Password: l.e.password})
	if err != nil {
		t.Fatal(err)
	}
	l.db = db
	settings := livesync.Settings{Encrypt: true, Passphrase: "load-test-passphrase"}
	salt, _, err := db.Handshake(l.ctx, couchdb.HandshakeOptions{NodeID: "load-writer", Settings: settings.TweakValues()})
	if err != nil {
		t.Fatal(err)
	}
	if l.codec, err = livesync.New(livesync.Config{Settings: settings, Salt: salt}); err != nil {
		t.Fatal(err)
	}
}

// newChunks drops from cs the chunks the writer already made.
func (l *loadRun) newChunks(cs []json.RawMessage) []json.RawMessage {
	return slices.DeleteFunc(cs, func(c json.RawMessage) bool {
		var head struct {
			ID string `json:"_id"`
		}
		json.Unmarshal(c, &head)
		seen := l.made[head.ID]
		l.made[head.ID] = true
		return seen
	})
}

// pushVault pushes the vault: chunks before the metadata that names
// them, so nothing of it is held.
func (l *loadRun) pushVault() {
	t := l.t
	start := time.Now()
	var batch, metas []json.RawMessage
	pushed := 0
	flush := func() {
		docs := append(batch, metas...)
		if len(docs) == 0 {
			return
		}
		loadPush(t, l.ctx, l.db, docs)
		pushed += len(docs)
		batch, metas = nil, nil
	}
	for i := range l.notes {
		m, cs := relayMainNote(t, l.codec, fmt.Sprintf("Vault/%03d/Note %05d.md", i/100, i), loadNoteText(uint64(i)))
		cs = l.newChunks(cs)
		batch = append(batch, cs...)
		metas = append(metas, m)
		if len(batch)+len(metas) >= 1000 {
			flush()
		}
	}
	flush()
	t.Logf("vault: %d notes, %d documents, encoded and pushed in %v", l.notes, pushed, time.Since(start).Round(time.Millisecond))
}

// startClients starts the clients, in LIVESYNC_LOAD_PROCESSES node
// processes (default one per CPU: one node process runs its clients on
// one core).
func (l *loadRun) startClients() {
	procs := min(l.clients, loadEnvInt(l.t, "LIVESYNC_LOAD_PROCESSES", runtime.NumCPU()))
	l.lines = make(chan string, l.clients+procs)
	for i := range procs {
		first, n := i*l.clients/procs, (i+1)*l.clients/procs-i*l.clients/procs
		l.loaders = append(l.loaders, startLoadProcess(l.t, l.ctx, l.e, first, n, l.lines))
	}
}

// sendChunks sends a live note's chunks.
func (l *loadRun) sendChunks(n *loadLiveNote) {
	n.chunksStart = time.Now().UnixMilli()
	loadPush(l.t, l.ctx, l.db, n.chunks)
}

// write runs the writer until every client caught up and loadLiveAfter
// more notes were written, then sends the last chunks and waits until
// every live note is released.
func (l *loadRun) write() {
	t := l.t
	stopAt := -1
	tick := time.NewTicker(loadTick)
	defer tick.Stop()
	for stopAt < 0 || len(l.live) < stopAt {
		select {
		case line, ok := <-l.lines:
			if !ok {
				t.Fatal("the clients exited")
			}
			var i, ms, docs int
			if _, err := fmt.Sscanf(line, "CAUGHTUP %d %d %d", &i, &ms, &docs); err != nil {
				t.Fatalf("clients said %q", line)
			}
			l.caught++
			l.catchUpMs = max(l.catchUpMs, ms)
			l.stored += docs
			if l.caught == l.clients {
				stopAt = len(l.live) + loadLiveAfter
			}
		case <-tick.C:
			l.writeLiveNote()
		case <-l.ctx.Done():
			t.Fatalf("timed out: %d of %d clients caught up", l.caught, l.clients)
		}
	}
	for _, n := range l.live[max(0, len(l.live)-loadLag):] {
		l.sendChunks(n)
	}
	// Every live note is released: each is in the feed.
	var liveIDs []string
	for _, n := range l.live {
		liveIDs = append(liveIDs, n.id)
	}
	loadWaitReleased(t, l.ctx, l.db, liveIDs)
}

// writeLiveNote is one tick of the writer: a new note's metadata, and
// the chunks of the note loadLag ticks older.
func (l *loadRun) writeLiveNote() {
	j := len(l.live)
	m, cs := relayMainNote(l.t, l.codec, fmt.Sprintf("Live/%05d.md", j), loadNoteText(1<<32+uint64(j)))
	cs = l.newChunks(cs)
	var head struct {
		ID string `json:"_id"`
	}
	json.Unmarshal(m, &head)
	l.live = append(l.live, &loadLiveNote{id: head.ID, chunks: cs})
	loadPush(l.t, l.ctx, l.db, []json.RawMessage{m})
	if j >= loadLag {
		l.sendChunks(l.live[j-loadLag])
	}
}

// finish ends the client processes and merges their results.
func (l *loadRun) finish() loadResult {
	var result loadResult
	result.Latencies = map[string][]float64{}
	for _, p := range l.loaders {
		r := p.finish(l.t)
		result.Clients = append(result.Clients, r.Clients...)
		for k, v := range r.Latencies {
			result.Latencies[k] = append(result.Latencies[k], v...)
		}
	}
	if len(result.Clients) != l.clients {
		l.t.Fatalf("%d results for %d clients", len(result.Clients), l.clients)
	}
	return result
}

// checkClients checks every client holds the relay's contents, was
// never served a note before the relay had its chunks, and saw every
// live note only after its chunks were sent. It returns the relay's
// document count.
func (l *loadRun) checkClients(result loadResult) int {
	t := l.t
	relayLines := loadRelayLines(t, l.ctx, l.db)
	relayDocs, relaySum := len(relayLines), loadSum(relayLines)
	for _, c := range result.Clients {
		if c.SHA256 != relaySum || c.Docs != relayDocs || c.Incomplete != 0 {
			t.Errorf("client %d: %d documents (sha256 %s), %d with chunks missing; the relay has %d (%s)",
				c.Client, c.Docs, c.SHA256[:12], c.Incomplete, relayDocs, relaySum[:12])
			l.diffClient(c.Client, relayLines)
		}
		for _, v := range c.Violations {
			t.Errorf("client %d was served %v before the relay had its chunks", c.Client, v)
		}
		for _, n := range l.live {
			if seen, ok := c.Seen[n.id]; !ok {
				t.Errorf("client %d never saw %s", c.Client, n.id)
			} else if seen < n.chunksStart {
				t.Errorf("client %d saw %s at %d, before its chunks were sent (%d)", c.Client, n.id, seen, n.chunksStart)
			}
		}
	}
	return relayDocs
}

// diffClient reports the documents a client lacks or has beyond the
// relay's, from the client's dump file.
func (l *loadRun) diffClient(client int, relayLines []string) {
	t := l.t
	var b []byte
	var err error
	for _, p := range l.loaders {
		if b, err = os.ReadFile(fmt.Sprintf("%s.client-%d", p.out, client)); err == nil {
			break
		}
	}
	got := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		got[line] = true
	}
	for _, line := range relayLines {
		if !got[line] {
			t.Errorf("client %d lacks %s", client, line)
		}
		delete(got, line)
	}
	for line := range got {
		t.Errorf("client %d has %s, the relay does not", client, line)
	}
}

// logStats logs the throughput and the client-side and relay-side
// request latencies.
func (l *loadRun) logStats(result loadResult, relayDocs int, before, after map[string]histogram) {
	t := l.t
	t.Logf("%d clients caught up with %d notes (%d documents each) in %.1f s: %d documents stored, %.0f docs/s",
		l.clients, l.notes, relayDocs, float64(l.catchUpMs)/1000, l.stored, float64(l.stored)/(float64(l.catchUpMs)/1000))
	t.Logf("writer: %d live notes, metadata first, all held then released; no violation", len(l.live))
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
