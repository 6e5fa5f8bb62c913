//go:build linux

// Command scaleoutbench measures LiveSync clients spread over 1, 2 and 3
// relays that keep their database on one CouchDB-protocol server
// ([databases.store] kind = "couchdb"), in one run
// (tests/bench/scaleout/run.sh).
//
//	scaleoutbench -relay BIN -script livesync-load.mjs [-notes 1000] [-clients 20] [-procs 6] [-setups bbolt,1,2,3]
//
// A setup "bbolt" is one relay with its database in a bbolt file (the
// default store), the baseline the couchdb setups are compared with.
// The server is the one LIVESYNC_TEST_COUCHDB_URL, _USER and _PASSWORD
// name (COUCHSERVER_PID: its process, for its CPU time). For each setup
// of N relays it
//
//  1. starts N relay processes in front of a new database on the server
//     (lease_ttl 15 s, refresh 2 s: the defaults), through a proxy in
//     this process that counts the requests the relays make;
//  2. pushes a vault of -notes E2EE notes of about 1 KiB through relay 1,
//     chunks before the metadata (nothing held);
//  3. starts -clients PouchDB 9 clients configured as LiveSync configures
//     them (tests/pouchdb/livesync-load.mjs, in -procs node processes,
//     process j talking to relay j mod N): a catch-up pull, then
//     LiveSync's continuous mode;
//  4. meanwhile a writer pushes a live note every 200 ms, its metadata
//     through relay 1 and its chunks four ticks later through relay N, so
//     a note held on one relay is released because its chunks came
//     through another; it goes on for 20 notes after every client caught
//     up, then waits until relay 1 serves every live note;
//  5. checks that every client ends with the database's documents and
//     revisions, and that no client saw a live note before its chunks
//     were sent.
//
// Throughput is the documents the clients stored by the end of their
// catch-up per second of the slowest catch-up; latency is client-side
// (request until its body is read, longpolls left out), over every
// request of the run. CPU is read from /proc/<pid>/stat (user + system)
// of the relays, the server, the node clients and this process at the
// clients' start and when the last one caught up, and /proc/stat for the
// whole machine over the same window: the catch-up window the throughput
// is measured over. Linux only (/proc).
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
)

const (
	passphrase = "scale-out benchmark passphrase, not a secret"
	tick       = 200 * time.Millisecond
	lag        = 4  // ticks between a live note's metadata and its chunks
	liveAfter  = 20 // live notes written after every client caught up
)

// server is the CouchDB-protocol server the relays keep their database on.
type server struct {
	url, user, password string
	pid                 int
}

type options struct {
	relayBin, node, script string
	notes, clients, procs  int
	leaseTTL, refresh      string
	// bbolt: the setup is one relay with its database in a bbolt file
	// (the default store), a baseline for the couchdb store.
	bbolt bool
	// strace: count the relays' syncs (fsync.go).
	strace bool
}

func main() {
	var o options
	flag.StringVar(&o.relayBin, "relay", "", "the livesync-relay binary")
	flag.StringVar(&o.node, "node", "node", "node")
	flag.StringVar(&o.script, "script", "tests/pouchdb/livesync-load.mjs", "the PouchDB client harness")
	flag.IntVar(&o.notes, "notes", 1000, "notes in the vault")
	flag.IntVar(&o.clients, "clients", 20, "PouchDB clients")
	flag.IntVar(&o.procs, "procs", 6, "node processes running the clients (the same in every setup)")
	flag.StringVar(&o.leaseTTL, "lease-ttl", "15s", "the relays' lease_ttl")
	flag.StringVar(&o.refresh, "refresh", "2s", "the relays' refresh")
	flag.BoolVar(&o.strace, "strace", false, "count the relays' fdatasync/fsync calls and their time with strace -c")
	setups := flag.String("setups", "1,2,3", `relay counts, one setup each; "bbolt": one relay with a bbolt file (a baseline)`)
	flag.Parse()
	srv := server{url: os.Getenv("LIVESYNC_TEST_COUCHDB_URL"), user: os.Getenv("LIVESYNC_TEST_COUCHDB_USER"),
		password: os.Getenv("LIVESYNC_TEST_COUCHDB_PASSWORD")}
	srv.pid, _ = strconv.Atoi(os.Getenv("COUCHSERVER_PID"))
	if o.relayBin == "" || srv.url == "" || srv.pid == 0 {
		fail(errors.New("usage: scaleoutbench -relay BIN (with LIVESYNC_TEST_COUCHDB_URL/_USER/_PASSWORD and COUCHSERVER_PID set: see run.sh)"))
	}
	var results []*result
	for _, s := range strings.Split(*setups, ",") {
		s = strings.TrimSpace(s)
		n, err := strconv.Atoi(s)
		o.bbolt = s == "bbolt"
		if o.bbolt {
			n, err = 1, nil
		}
		if err != nil || n < 1 {
			fail(fmt.Errorf("-setups: %q", s))
		}
		r, err := runSetup(o, srv, n)
		if err != nil {
			fail(fmt.Errorf("setup %s: %w", s, err))
		}
		b, _ := json.Marshal(r)
		fmt.Println(string(b))
		results = append(results, r)
	}
	report(os.Stdout, o, results)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "scaleoutbench:", err)
	os.Exit(1)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// result is one setup's figures.
type result struct {
	Setup      string  `json:"setup"` // "bbolt" or "couchdb"
	Relays     int     `json:"relays"`
	Clients    int     `json:"clients"`
	Notes      int     `json:"notes"`
	Docs       int     `json:"docs"` // documents in the database at the end
	CatchUpS   float64 `json:"catchUpSec"`
	Stored     int     `json:"stored"`
	DocsPerS   float64 `json:"docsPerSec"`
	Requests   int     `json:"requests"`
	P50Ms      float64 `json:"p50Ms"`
	P99Ms      float64 `json:"p99Ms"`
	MaxMs      float64 `json:"maxMs"`
	LiveNotes  int     `json:"liveNotes"`
	Violations int     `json:"violations"`
	CPU        cpuUse  `json:"cpu"`
	Leaders    int     `json:"leaders"` // relays that said they held the lease at the end
	// The requests the relays made to the server while the clients ran
	// (couchdb setups; longpolls counted apart), and the largest kinds.
	ServerRequests int    `json:"serverRequests"`
	ServerKinds    string `json:"serverKinds"`
	// ByKind is the client-side latency by kind of request.
	ByKind map[string]kindLatency `json:"byKind"`
	// RelayByRoute is the relays' own time to answer, by route, over
	// the same requests (their /metrics; see relaytime.go).
	RelayByRoute map[string]routeTime `json:"relayByRoute"`
	// Syncs are the relays' fdatasync/fsync calls over the same window
	// (-strace).
	Syncs []syncUse `json:"syncs,omitempty"`
}

type kindLatency struct {
	N     int     `json:"n"`
	P50Ms float64 `json:"p50Ms"`
	P99Ms float64 `json:"p99Ms"`
}

// runSetup runs one setup of n relays.
func runSetup(o options, srv server, n int) (*result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "scaleoutbench-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	dbName := fmt.Sprintf("scaleout_bench_%d_%d", n, time.Now().UnixNano())
	defer deleteDB(srv, dbName)
	admin := randomHex()
	proxy, err := startProxy(srv.url)
	if err != nil {
		return nil, err
	}
	defer proxy.close()
	via := srv
	via.url = proxy.url
	var relays []*relayProc
	defer func() {
		for _, r := range relays {
			r.stop()
		}
	}()
	for i := range n {
		r, err := startRelay(ctx, o, via, filepath.Join(dir, fmt.Sprint("relay", i)), dbName, admin)
		if err != nil {
			return nil, err
		}
		relays = append(relays, r)
	}
	if o.bbolt {
		logf("one relay serves the vault from a bbolt file")
	} else {
		logf("%d relays serve %s on the server", n, dbName)
	}
	w, err := newWriter(ctx, relays[0].url, relays[n-1].url, admin)
	if err != nil {
		return nil, err
	}
	if err := w.pushVault(ctx, o.notes); err != nil {
		return nil, err
	}
	res := &result{Setup: "couchdb", Relays: n, Clients: o.clients, Notes: o.notes}
	if o.bbolt {
		res.Setup = "bbolt"
	}
	proxy.take()
	if err := runLoad(ctx, o, srv, relays, w, admin, res); err != nil {
		return nil, err
	}
	res.ServerRequests, res.ServerKinds = summary(proxy.take())
	for _, r := range relays {
		if r.leader(admin) {
			res.Leaders++
		}
	}
	return res, nil
}

// runLoad starts the clients and the writer, measures, and checks.
func runLoad(ctx context.Context, o options, srv server, relays []*relayProc, w *writer, admin string, res *result) error {
	lines := make(chan string, o.clients+o.procs)
	var procs []*loadProc
	defer func() {
		for _, p := range procs {
			p.cmd.Process.Kill()
		}
	}()
	watch := &sampler{srv: srv.pid, self: os.Getpid()}
	for _, r := range relays {
		watch.relays = append(watch.relays, r.cmd.Process.Pid)
	}
	procCount := min(o.procs, o.clients)
	durations := func() []map[string]*histogram {
		var out []map[string]*histogram
		for _, r := range relays {
			h, err := scrapeDurations(r.url, admin)
			if err != nil {
				logf("reading the relay's request durations: %v", err)
			}
			out = append(out, h)
		}
		return out
	}
	durs0 := durations()
	var tracers []*syncTracer
	if o.strace {
		for _, r := range relays {
			st, err := startSyncTracer(r.cmd.Process.Pid)
			if err != nil {
				return err
			}
			tracers = append(tracers, st)
		}
	}
	start := watch.sample()
	for j := range procCount {
		first, k := j*o.clients/procCount, (j+1)*o.clients/procCount-j*o.clients/procCount
		p, err := startLoad(ctx, o, relays[j%len(relays)].url, admin, first, k, lines)
		if err != nil {
			return err
		}
		procs = append(procs, p)
		watch.clients = append(watch.clients, p.cmd.Process.Pid)
	}
	var end cpuSample
	caught, catchUpMs, stored := 0, 0, 0
	err := w.write(ctx, func() bool {
		select {
		case line, ok := <-lines:
			if !ok {
				return false
			}
			var i, ms, docs int
			if _, err := fmt.Sscanf(line, "CAUGHTUP %d %d %d", &i, &ms, &docs); err != nil {
				logf("clients said %q", line)
				return false
			}
			caught, catchUpMs, stored = caught+1, max(catchUpMs, ms), stored+docs
			if caught == o.clients {
				end = watch.sample()
				logf("every client caught up in %.1f s", float64(catchUpMs)/1000)
			}
		default:
		}
		return true
	}, func() bool { return caught == o.clients })
	if err != nil {
		return err
	}
	res.CatchUpS, res.Stored = float64(catchUpMs)/1000, stored
	res.DocsPerS = float64(stored) / res.CatchUpS
	res.CPU = use(start, end, len(relays))
	var merged loadResult
	for _, p := range procs {
		r, err := p.finish()
		if err != nil {
			return err
		}
		merged.Clients = append(merged.Clients, r.Clients...)
		for k, v := range r.Latencies {
			merged.all = append(merged.all, v...)
			if merged.Latencies == nil {
				merged.Latencies = map[string][]float64{}
			}
			merged.Latencies[k] = append(merged.Latencies[k], v...)
		}
	}
	res.RelayByRoute = routeTimes(durs0, durations())
	for _, st := range tracers {
		res.Syncs = append(res.Syncs, st.stop())
	}
	return w.check(ctx, merged, res)
}

// relayProc is one running relay.
type relayProc struct {
	cmd  *exec.Cmd
	url  string
	out  *syncBuffer
	done chan struct{}
}

// startRelay starts a relay whose only database, "vault", is dbName on
// the server, and waits until it serves it.
func startRelay(ctx context.Context, o options, srv server, dir, dbName, admin string) (*relayProc, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	conf := fmt.Sprintf("listen = \"127.0.0.1:%d\"\n\n[log]\nlevel = \"warn\"\n\n[[databases]]\nname = \"vault\"\n\n"+
		"[databases.store]\nkind = \"couchdb\"\nurl = %q\ndatabase = %q\nuser = %q\npassword_env = \"SCALEOUT_COUCHDB_PASSWORD\"\n"+
		"lease_ttl = %q\nrefresh = %q\n", port, srv.url, dbName, srv.user, o.leaseTTL, o.refresh)
	if o.bbolt {
		conf = fmt.Sprintf("listen = \"127.0.0.1:%d\"\ndata_dir = %q\n\n[log]\nlevel = \"warn\"\n\n[[databases]]\nname = \"vault\"\n",
			port, filepath.Join(dir, "data"))
	}
	if err := os.WriteFile(filepath.Join(dir, "relay.toml"), []byte(conf), 0o600); err != nil {
		return nil, err
	}
	r := &relayProc{url: fmt.Sprintf("http://127.0.0.1:%d", port), out: &syncBuffer{}, done: make(chan struct{})}
	r.cmd = exec.Command(o.relayBin, "--config", filepath.Join(dir, "relay.toml"))
	r.cmd.Dir = dir
	r.cmd.Env = append(os.Environ(), "LIVESYNC_RELAY_ADMIN_USER=admin", "LIVESYNC_RELAY_ADMIN_PASSWORD="+admin,
		"SCALEOUT_COUCHDB_PASSWORD="+srv.password)
	r.cmd.Stdout, r.cmd.Stderr = r.out, r.out
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // no relay outlives the benchmark
	if err := r.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { r.cmd.Wait(); close(r.done) }()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		select {
		case <-r.done:
			return nil, fmt.Errorf("the relay exited:\n%s", r.out.String())
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if code, _ := get(r.url+"/vault", admin, nil); code == http.StatusOK {
			return r, nil
		}
	}
	r.stop()
	return nil, fmt.Errorf("the relay did not serve /vault within a minute:\n%s", r.out.String())
}

// stop ends the relay as an operator does (SIGTERM), killing it if it
// has not stopped within 40 s.
func (r *relayProc) stop() {
	r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(40 * time.Second):
		r.cmd.Process.Kill()
		<-r.done
	}
}

// leader reports whether the relay's /status says it holds the vault's
// lease.
func (r *relayProc) leader(admin string) bool {
	var s struct {
		Databases []struct {
			Name   string `json:"name"`
			Shared *struct {
				Leader bool `json:"leader"`
			} `json:"shared"`
		} `json:"databases"`
	}
	if code, err := get(r.url+"/status", admin, &s); code != http.StatusOK || err != nil {
		return false
	}
	for _, d := range s.Databases {
		if d.Name == "vault" && d.Shared != nil {
			return d.Shared.Leader
		}
	}
	return false
}

// get GETs url as the relay admin (or the server admin) and decodes a
// JSON answer into v if given.
func get(url, password string, v any) (int, error) {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return 0, err
	}
	req.SetBasicAuth("admin", password)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if v != nil {
		return resp.StatusCode, json.NewDecoder(resp.Body).Decode(v)
	}
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// deleteDB deletes the setup's database on the server (it keeps every
// database in memory).
func deleteDB(srv server, name string) {
	req, _ := http.NewRequest("DELETE", srv.url+"/"+name, nil)
	req.SetBasicAuth(srv.user, srv.password)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func randomHex() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// syncBuffer is a bytes.Buffer safe for a process's output.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// loadProc is one livesync-load.mjs process.
type loadProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *syncBuffer
	out    string
	done   chan struct{}
}

// loadResult is what livesync-load.mjs writes to its --out file.
type loadResult struct {
	Clients []struct {
		Client     int              `json:"client"`
		Docs       int              `json:"docs"`
		Incomplete int              `json:"incomplete"`
		SHA256     string           `json:"sha256"`
		Violations []map[string]any `json:"violations"`
		Seen       map[string]int64 `json:"seen"`
	} `json:"clients"`
	Latencies map[string][]float64 `json:"latencies"` // ms, by kind
	all       []float64
}

// startLoad starts k clients numbered from first against url; their
// CAUGHTUP lines go to lines.
func startLoad(ctx context.Context, o options, url, admin string, first, k int, lines chan<- string) (*loadProc, error) {
	out, err := os.CreateTemp("", "scaleoutbench-clients-*.json")
	if err != nil {
		return nil, err
	}
	out.Close()
	p := &loadProc{out: out.Name(), stderr: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.CommandContext(ctx, o.node, o.script, "--url", url, "--db", "vault", "--out", p.out,
		"--first", strconv.Itoa(first), "--clients", strconv.Itoa(k), "--watch-prefix", "live/")
	p.cmd.Env = append(os.Environ(), "LIVESYNC_TEST_COUCHDB_USER=admin", "LIVESYNC_TEST_COUCHDB_PASSWORD="+admin)
	p.cmd.Stderr = p.stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "DONE" {
				return
			}
			lines <- sc.Text()
		}
	}()
	return p, nil
}

// finish tells the clients to finish and reads their results.
func (p *loadProc) finish() (loadResult, error) {
	var r loadResult
	fmt.Fprintln(p.stdin, "FINISH")
	<-p.done
	if err := p.cmd.Wait(); err != nil {
		return r, fmt.Errorf("clients: %v\n%s", err, p.stderr.String())
	}
	defer os.Remove(p.out)
	b, err := os.ReadFile(p.out)
	if err != nil {
		return r, err
	}
	for i := range 1000 {
		os.Remove(fmt.Sprintf("%s.client-%d", p.out, i))
	}
	return r, json.Unmarshal(b, &r)
}

// writer is the device that pushes the vault and the live notes.
type writer struct {
	meta, chunks *couchdb.DB // through the first relay, through the last
	codec        *livesync.Codec
	made         map[string]bool // chunks already sent (one device makes a chunk once)
	live         []*liveNote
}

type liveNote struct {
	id          string
	chunks      []json.RawMessage
	chunksStart int64 // Unix ms just before the chunks were sent
}

func newWriter(ctx context.Context, metaURL, chunksURL, admin string) (*writer, error) {
	w := &writer{made: map[string]bool{}}
	var err error
	if w.meta, err = couchdb.New(couchdb.Config{URL: metaURL, Database: "vault", User: "admin", Password: admin}); err != nil {
		return nil, err
	}
	if w.chunks, err = couchdb.New(couchdb.Config{URL: chunksURL, Database: "vault", User: "admin", Password: admin}); err != nil {
		return nil, err
	}
	settings := livesync.Settings{Encrypt: true, Passphrase: passphrase}
	salt, _, err := w.meta.Handshake(ctx, couchdb.HandshakeOptions{NodeID: "scaleout-writer", Settings: settings.TweakValues()})
	if err != nil {
		return nil, err
	}
	w.codec, err = livesync.New(livesync.Config{Settings: settings, Salt: salt})
	return w, err
}

// note returns a note's metadata and its chunks not sent yet, in the
// remote form with the first revisions a replicator sends.
func (w *writer) note(path string, seed uint64) (json.RawMessage, []json.RawMessage, error) {
	m, cs, err := w.codec.FileDocs(path, []byte(noteText(seed)), 1700000000000, 1700000000000)
	if err != nil {
		return nil, nil, err
	}
	withRev := func(d livesync.Doc) (json.RawMessage, error) {
		rd, err := w.codec.EncodeRemote(d)
		if err != nil {
			return nil, err
		}
		b, _ := json.Marshal(rd)
		sum := md5.Sum(b)
		h := hex.EncodeToString(sum[:])
		rd["_rev"] = json.RawMessage(`"1-` + h + `"`)
		rd["_revisions"] = json.RawMessage(fmt.Sprintf(`{"start":1,"ids":[%q]}`, h))
		return json.Marshal(rd)
	}
	var chunks []json.RawMessage
	for _, c := range cs {
		if w.made[string(c.ID)] {
			continue
		}
		w.made[string(c.ID)] = true
		b, err := withRev(livesync.ChunkDoc(c))
		if err != nil {
			return nil, nil, err
		}
		chunks = append(chunks, b)
	}
	meta, err := withRev(m.Doc())
	return meta, chunks, err
}

// noteText is a note of about 1 KiB of words seeded by i.
func noteText(i uint64) string {
	r := mrand.New(mrand.NewPCG(i, 0x7363616c65))
	words := []string{"relay", "vault", "chunk", "note", "sync", "held", "release", "lease", "cluster", "couch",
		"shard", "node", "river", "stone", "light", "paper", "garden", "window", "client", "batch"}
	var b strings.Builder
	fmt.Fprintf(&b, "# Note %d\n\n", i)
	for b.Len() < 1024 {
		for range 10 {
			b.WriteString(words[r.IntN(len(words))])
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d\n", r.Uint32())
	}
	return b.String()
}

func push(ctx context.Context, db *couchdb.DB, docs []json.RawMessage) error {
	res, err := db.BulkDocs(ctx, docs)
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Error != "" {
			return fmt.Errorf("push %s: %s %s", r.ID, r.Error, r.Reason)
		}
	}
	return nil
}

// pushVault pushes n notes, chunks before the metadata naming them.
func (w *writer) pushVault(ctx context.Context, n int) error {
	start := time.Now()
	var chunks, metas []json.RawMessage
	pushed := 0
	flush := func() error {
		docs := append(chunks, metas...)
		chunks, metas = nil, nil
		pushed += len(docs)
		if len(docs) == 0 {
			return nil
		}
		return push(ctx, w.meta, docs)
	}
	for i := range n {
		m, cs, err := w.note(fmt.Sprintf("Vault/%03d/Note %05d.md", i/100, i), uint64(i))
		if err != nil {
			return err
		}
		chunks, metas = append(chunks, cs...), append(metas, m)
		if len(chunks)+len(metas) >= 1000 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	logf("vault: %d notes, %d documents pushed in %v", n, pushed, time.Since(start).Round(time.Millisecond))
	return nil
}

// write pushes a live note every tick (metadata through the first relay,
// the chunks of the note lag ticks older through the last one), calling
// poll before each; it stops liveAfter notes after caughtUp first says
// true, sends the last chunks and waits until the first relay serves
// every live note.
func (w *writer) write(ctx context.Context, poll func() bool, caughtUp func() bool) error {
	t := time.NewTicker(tick)
	defer t.Stop()
	stopAt := -1
	for stopAt < 0 || len(w.live) < stopAt {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		for range 100 {
			if !poll() {
				return errors.New("the clients stopped")
			}
		}
		if stopAt < 0 && caughtUp() {
			stopAt = len(w.live) + liveAfter
		}
		j := len(w.live)
		m, cs, err := w.note(fmt.Sprintf("Live/%05d.md", j), 1<<32+uint64(j))
		if err != nil {
			return err
		}
		var head struct {
			ID string `json:"_id"`
		}
		json.Unmarshal(m, &head)
		w.live = append(w.live, &liveNote{id: head.ID, chunks: cs})
		if err := push(ctx, w.meta, []json.RawMessage{m}); err != nil {
			return err
		}
		if j >= lag {
			if err := w.sendChunks(ctx, w.live[j-lag]); err != nil {
				return err
			}
		}
	}
	for _, n := range w.live[max(0, len(w.live)-lag):] {
		if err := w.sendChunks(ctx, n); err != nil {
			return err
		}
	}
	return w.waitReleased(ctx)
}

func (w *writer) sendChunks(ctx context.Context, n *liveNote) error {
	n.chunksStart = time.Now().UnixMilli()
	return push(ctx, w.chunks, n.chunks)
}

// waitReleased follows the first relay's feed until every live note is
// in it.
func (w *writer) waitReleased(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	left := map[string]bool{}
	for _, n := range w.live {
		left[n.id] = true
	}
	since := ""
	for len(left) > 0 {
		page, err := w.meta.Changes(ctx, engine.ChangesRequest{Since: since, Wait: since != ""})
		if err != nil {
			return fmt.Errorf("waiting for %d live notes to be released: %w", len(left), err)
		}
		for _, c := range page.Results {
			delete(left, c.ID)
		}
		since = page.LastSeq
	}
	return nil
}

// check compares every client with the database as the first relay
// serves it and fills in the rest of res.
func (w *writer) check(ctx context.Context, r loadResult, res *result) error {
	page, err := w.meta.Changes(ctx, engine.ChangesRequest{})
	if err != nil {
		return err
	}
	var lines []string
	for _, c := range page.Results {
		if !c.Deleted {
			lines = append(lines, c.ID+" "+c.Revs[0])
		}
	}
	slices.Sort(lines)
	sum := sha256Hex([]byte(strings.Join(lines, "\n")))
	res.Docs, res.LiveNotes = len(lines), len(w.live)
	var bad []string
	for _, c := range r.Clients {
		if c.SHA256 != sum || c.Docs != len(lines) || c.Incomplete != 0 {
			bad = append(bad, fmt.Sprintf("client %d: %d documents, %d incomplete", c.Client, c.Docs, c.Incomplete))
		}
		res.Violations += len(c.Violations)
		for _, n := range w.live {
			if seen, ok := c.Seen[n.id]; ok && seen < n.chunksStart {
				res.Violations++
			}
		}
	}
	if len(r.Clients) != res.Clients {
		bad = append(bad, fmt.Sprintf("%d results for %d clients", len(r.Clients), res.Clients))
	}
	res.Requests = len(r.all)
	res.P50Ms, res.P99Ms, res.MaxMs = percentile(r.all, 50), percentile(r.all, 99), percentile(r.all, 100)
	res.ByKind = map[string]kindLatency{}
	for k, v := range r.Latencies {
		res.ByKind[k] = kindLatency{len(v), percentile(v, 50), percentile(v, 99)}
	}
	if len(bad) > 0 || res.Violations > 0 {
		return fmt.Errorf("%d violations; clients differ from the database (%d documents): %s", res.Violations, len(lines), strings.Join(bad, "; "))
	}
	return nil
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
