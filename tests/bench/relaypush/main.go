//go:build linux

// Command relaypush measures what a PouchDB 9 push of an E2EE vault costs
// the relay, with the chunks sent before the metadata naming them and
// with the metadata first (which PouchDB does when its local changes feed
// has the metadata first), and checks that every note is visible when
// the push returns.
//
//	relaypush -relay BIN [-base BIN] [-notes 5000] [-runs 1] [-orders chunks,meta] [-strace] [-cpuprofile PREFIX]
//
// Each run starts a fresh relay (a bbolt data directory in a temporary
// directory), makes a vault of -notes E2EE notes of about 1 KiB for it
// (the handshake's salt is the relay's), writes them in the run's order
// to a file and has tests/pouchdb/push.mjs push it with LiveSync's
// settings (batch size 25, batches limit 25). The relay's CPU time
// (utime + stime of /proc/PID/stat) is read before and after the push;
// with -strace, strace -c counts its fdatasync calls over the push. When
// the push returns, one _changes request and a GET of every note count
// the notes the relay does not serve yet. One JSON line per run on
// stdout, then a table of medians. With -cpuprofile the relay writes a
// CPU profile of its whole life to PREFIX-ORDER-RUN.pprof
// (LIVESYNC_RELAY_CPUPROFILE). With -base, every run is made with that
// binary too, right after the same run with -relay (a before/after
// comparison in one run: compare the ratios, not absolute figures), and
// the table has a row per binary and order.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/engine/livesync"
)

const (
	passphrase = "relay push benchmark passphrase, not a secret"
	adminPass  = "relaypush-admin-password"
)

type options struct {
	relayBin, baseBin, node, script, cpuprofile string
	notes, runs                                 int
	orders                                      []string
	strace                                      bool
}

// result is one run's figures.
type result struct {
	Relay      string  `json:"relay"` // "relay" (-relay) or "base" (-base)
	Order      string  `json:"order"` // "chunks" (chunks first) or "meta" (metadata first)
	Run        int     `json:"run"`
	Notes      int     `json:"notes"`
	Docs       int     `json:"docs"`
	PushMs     float64 `json:"pushMs"`
	RelayCPUMs float64 `json:"relayCpuMs"`
	Fdatasync  int     `json:"fdatasync"` // -1 without -strace
	// MissingChanges and MissingGet count the notes not in the _changes
	// feed, and not served by GET, when the push returned.
	MissingChanges int `json:"missingChanges"`
	MissingGet     int `json:"missingGet"`
}

func main() {
	var o options
	flag.StringVar(&o.relayBin, "relay", "", "the livesync-relay binary")
	flag.StringVar(&o.baseBin, "base", "", "a livesync-relay binary to compare with, run after -relay in every run")
	flag.StringVar(&o.node, "node", "node", "node")
	flag.StringVar(&o.script, "script", "tests/pouchdb/push.mjs", "the PouchDB push script")
	flag.StringVar(&o.cpuprofile, "cpuprofile", "", "the relay's CPU profiles: PREFIX-ORDER-RUN.pprof")
	flag.IntVar(&o.notes, "notes", 5000, "notes in the vault")
	flag.IntVar(&o.runs, "runs", 1, "runs of each order, interleaved")
	flag.BoolVar(&o.strace, "strace", false, "count the relay's fdatasync calls with strace -c")
	orders := flag.String("orders", "chunks,meta", "the orders to run: chunks (chunks first), meta (metadata first)")
	flag.Parse()
	o.orders = strings.Split(*orders, ",")
	if o.relayBin == "" {
		fail(errors.New("usage: relaypush -relay BIN [-base BIN] [-notes 5000] [-runs 1] [-orders chunks,meta] [-strace] [-cpuprofile PREFIX]"))
	}
	bins := [][2]string{{"relay", o.relayBin}}
	if o.baseBin != "" {
		bins = append(bins, [2]string{"base", o.baseBin})
	}
	var all []result
	for run := 1; run <= o.runs; run++ {
		for _, order := range o.orders {
			for _, bin := range bins {
				r, err := runOnce(o, bin[0], bin[1], order, run)
				if err != nil {
					fail(fmt.Errorf("%s %s run %d: %w", bin[0], order, run, err))
				}
				b, _ := json.Marshal(r)
				fmt.Println(string(b))
				all = append(all, *r)
			}
		}
	}
	for _, bin := range bins {
		var rs []result
		for _, r := range all {
			if r.Relay == bin[0] {
				rs = append(rs, r)
			}
		}
		if len(bins) > 1 {
			fmt.Printf("\n%s (%s):\n", bin[0], bin[1])
		}
		report(rs)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "relaypush:", err)
	os.Exit(1)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// report prints the medians of each order and the ratio of the
// metadata-first relay CPU to the chunks-first one.
func report(all []result) {
	by := map[string][]result{}
	for _, r := range all {
		by[r.Order] = append(by[r.Order], r)
	}
	fmt.Printf("\n| order | runs | push s | relay CPU s (runs) | median relay CPU s | fdatasync | not visible at return (_changes / GET) |\n|---|---|---|---|---|---|---|\n")
	med := map[string]float64{}
	for _, order := range []string{"chunks", "meta"} {
		rs := by[order]
		if len(rs) == 0 {
			continue
		}
		var push, cpu, fds []float64
		var runs []string
		miss := ""
		for _, r := range rs {
			push, cpu, fds = append(push, r.PushMs), append(cpu, r.RelayCPUMs), append(fds, float64(r.Fdatasync))
			runs = append(runs, fmt.Sprintf("%.2f", r.RelayCPUMs/1000))
			miss += fmt.Sprintf("%d/%d ", r.MissingChanges, r.MissingGet)
		}
		med[order] = median(cpu)
		fmt.Printf("| %s first | %d | %.1f | %s | %.2f | %.0f | %s|\n", map[string]string{"chunks": "chunks", "meta": "metadata"}[order],
			len(rs), median(push)/1000, strings.Join(runs, ", "), med[order]/1000, median(fds), miss)
	}
	if med["chunks"] > 0 && med["meta"] > 0 {
		fmt.Printf("\nrelay CPU, metadata first / chunks first: %.2fx\n", med["meta"]/med["chunks"])
	}
}

func runOnce(o options, label, bin, order string, run int) (*result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	dir, err := os.MkdirTemp("", "relaypush-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	profile := ""
	if o.cpuprofile != "" {
		name := fmt.Sprintf("%s-%s-%d.pprof", o.cpuprofile, order, run)
		if label != "relay" {
			name = fmt.Sprintf("%s-%s-%s-%d.pprof", o.cpuprofile, label, order, run)
		}
		if profile, err = filepath.Abs(name); err != nil {
			return nil, err
		}
	}
	rp, err := startRelay(ctx, bin, dir, profile)
	if err != nil {
		return nil, err
	}
	defer rp.stop()
	metas, docs, err := makeVault(ctx, rp.url, o.notes, order)
	if err != nil {
		return nil, err
	}
	in := filepath.Join(dir, "docs.json")
	b, _ := json.Marshal(docs)
	if err := os.WriteFile(in, b, 0o600); err != nil {
		return nil, err
	}
	res := &result{Relay: label, Order: order, Run: run, Notes: o.notes, Docs: len(docs), Fdatasync: -1}
	var st *straceProc
	if o.strace {
		if st, err = startStrace(rp.cmd.Process.Pid); err != nil {
			return nil, err
		}
	}
	cpu0 := procCPUMs(rp.cmd.Process.Pid)
	cmd := exec.CommandContext(ctx, o.node, o.script, "--url", rp.url, "--db", "vault", "--in", in)
	cmd.Env = append(os.Environ(), "LIVESYNC_TEST_COUCHDB_USER=admin", "LIVESYNC_TEST_COUCHDB_PASSWORD="+adminPass)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("push: %w", err)
	}
	// Visibility first, at once: nothing may still be on its way.
	res.MissingChanges, res.MissingGet, err = missing(ctx, rp.url, metas)
	if err != nil {
		return nil, err
	}
	res.RelayCPUMs = procCPUMs(rp.cmd.Process.Pid) - cpu0
	if st != nil {
		if res.Fdatasync, err = st.stop(); err != nil {
			return nil, err
		}
	}
	var pr struct {
		MS float64 `json:"ms"`
	}
	if err := json.Unmarshal(out, &pr); err != nil {
		return nil, fmt.Errorf("push output %q: %w", out, err)
	}
	res.PushMs = pr.MS
	logf("%s: %s first, run %d: push %.1f s, relay CPU %.2f s, fdatasync %d, not visible %d (_changes) %d (GET)",
		label, order, run, pr.MS/1000, res.RelayCPUMs/1000, res.Fdatasync, res.MissingChanges, res.MissingGet)
	return res, nil
}

// procCPUMs is utime + stime of a process, in milliseconds.
func procCPUMs(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) * 10 // clock ticks of 10 ms (CLK_TCK 100)
}

type straceProc struct {
	cmd *exec.Cmd
	out bytes.Buffer
}

func startStrace(pid int) (*straceProc, error) {
	s := &straceProc{}
	s.cmd = exec.Command("strace", "-c", "-f", "-e", "trace=fdatasync,fsync", "-p", strconv.Itoa(pid))
	s.cmd.Stderr = &s.out
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	time.Sleep(500 * time.Millisecond) // strace attaches to every thread
	return s, nil
}

var fdatasyncRow = regexp.MustCompile(`(?m)^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?fdatasync\s*$`)

func (s *straceProc) stop() (int, error) {
	s.cmd.Process.Signal(syscall.SIGINT)
	s.cmd.Wait()
	m := fdatasyncRow.FindStringSubmatch(s.out.String())
	if m == nil {
		return 0, nil
	}
	return strconv.Atoi(m[1])
}

type relayProc struct {
	url  string
	cmd  *exec.Cmd
	done chan struct{}
	out  bytes.Buffer
}

func startRelay(ctx context.Context, bin, dir, profile string) (*relayProc, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	// A metadata-first push holds every note at once: the per-user
	// limit (2,000 by default) is raised to let it.
	conf := fmt.Sprintf("listen = \"127.0.0.1:%d\"\ndata_dir = %q\n\n[log]\nlevel = \"warn\"\n\n"+
		"[holdback]\nmax_held_documents = 100000\nmax_held_documents_per_user = 100000\n\n[[databases]]\nname = \"vault\"\n",
		port, filepath.Join(dir, "data"))
	if err := os.WriteFile(filepath.Join(dir, "relay.toml"), []byte(conf), 0o600); err != nil {
		return nil, err
	}
	r := &relayProc{url: fmt.Sprintf("http://127.0.0.1:%d", port), done: make(chan struct{})}
	r.cmd = exec.Command(bin, "--config", filepath.Join(dir, "relay.toml"))
	r.cmd.Dir = dir
	r.cmd.Env = append(os.Environ(), "LIVESYNC_RELAY_ADMIN_USER=admin", "LIVESYNC_RELAY_ADMIN_PASSWORD="+adminPass)
	if profile != "" {
		r.cmd.Env = append(r.cmd.Env, "LIVESYNC_RELAY_CPUPROFILE="+profile)
	}
	r.cmd.Stdout, r.cmd.Stderr = &r.out, &r.out
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { r.cmd.Wait(); close(r.done) }()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		select {
		case <-r.done:
			return nil, fmt.Errorf("the relay exited:\n%s", r.out.String())
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if code, _ := get(ctx, r.url+"/vault", nil); code == http.StatusOK {
			return r, nil
		}
	}
	r.stop()
	return nil, errors.New("the relay did not serve /vault within a minute")
}

// stop ends the relay as an operator does (SIGTERM), so that a CPU
// profile is written.
func (r *relayProc) stop() {
	r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		r.cmd.Process.Kill()
		<-r.done
	}
}

func get(ctx context.Context, u string, v any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	req.SetBasicAuth("admin", adminPass)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if v != nil && resp.StatusCode == http.StatusOK {
		return resp.StatusCode, json.NewDecoder(resp.Body).Decode(v)
	}
	return resp.StatusCode, nil
}

// makeVault makes the E2EE documents of n notes for the relay's vault
// (handshake first: the salt is the relay's), in the remote form with the
// first revisions a replicator sends: the metadata ids, and every
// document in the order asked.
func makeVault(ctx context.Context, relayURL string, n int, order string) ([]string, []json.RawMessage, error) {
	db, err := couchdb.New(couchdb.Config{URL: relayURL, Database: "vault", User: "admin", Password: adminPass})
	if err != nil {
		return nil, nil, err
	}
	settings := livesync.Settings{Encrypt: true, Passphrase: passphrase}
	salt, _, err := db.Handshake(ctx, couchdb.HandshakeOptions{NodeID: "relaypush", Settings: settings.TweakValues()})
	if err != nil {
		return nil, nil, err
	}
	codec, err := livesync.New(livesync.Config{Settings: settings, Salt: salt})
	if err != nil {
		return nil, nil, err
	}
	withRev := func(d livesync.Doc) (json.RawMessage, error) {
		rd, err := codec.EncodeRemote(d)
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
	made := map[string]bool{}
	var ids []string
	var metas, chunks []json.RawMessage
	for i := range n {
		m, cs, err := codec.FileDocs(fmt.Sprintf("Vault/%03d/Note %05d.md", i/100, i), []byte(noteText(uint64(i))), 1700000000000, 1700000000000)
		if err != nil {
			return nil, nil, err
		}
		for _, c := range cs {
			if made[string(c.ID)] {
				continue
			}
			made[string(c.ID)] = true
			b, err := withRev(livesync.ChunkDoc(c))
			if err != nil {
				return nil, nil, err
			}
			chunks = append(chunks, b)
		}
		b, err := withRev(m.Doc())
		if err != nil {
			return nil, nil, err
		}
		var head struct {
			ID string `json:"_id"`
		}
		json.Unmarshal(b, &head)
		ids = append(ids, head.ID)
		metas = append(metas, b)
	}
	if order == "meta" {
		return ids, append(metas, chunks...), nil
	}
	return ids, append(chunks, metas...), nil
}

// noteText is a note of about 1 KiB of words seeded by i.
func noteText(i uint64) string {
	r := mrand.New(mrand.NewPCG(i, 0x72656c6179))
	words := []string{"relay", "vault", "chunk", "note", "sync", "held", "release", "lease", "push", "couch",
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

// missing counts the notes the relay does not serve: in one _changes
// feed, then with a GET of each.
func missing(ctx context.Context, relayURL string, ids []string) (int, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, relayURL+"/vault/_changes?style=all_docs", nil)
	if err != nil {
		return 0, 0, err
	}
	req.SetBasicAuth("admin", adminPass)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	seen := map[string]bool{}
	var feed struct {
		Results []struct {
			ID string `json:"id"`
		} `json:"results"`
	}
	err = json.NewDecoder(bufio.NewReader(resp.Body)).Decode(&feed)
	resp.Body.Close()
	if err != nil {
		return 0, 0, fmt.Errorf("_changes: %w", err)
	}
	for _, r := range feed.Results {
		seen[r.ID] = true
	}
	inChanges := 0
	for _, id := range ids {
		if !seen[id] {
			inChanges++
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	notServed := 0
	work := make(chan string)
	var firstErr error
	for range 8 {
		wg.Go(func() {
			for id := range work {
				code, err := get(ctx, relayURL+"/vault/"+url.PathEscape(id), nil)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if code != http.StatusOK {
					notServed++
				}
				mu.Unlock()
			}
		})
	}
	for _, id := range ids {
		work <- id
	}
	close(work)
	wg.Wait()
	return inChanges, notServed, firstErr
}
