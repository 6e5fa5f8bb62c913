// Command gopull is the Go side of the pull benchmark (bench/pull/run.sh).
//
//	gopull load -url URL -db NAME [-docs 10000] [-size 1024]
//	gopull pull -url URL -db NAME [-batch 25] [-limit 25] [-latency 20ms] [-conns N] [-cpuprofile FILE]
//
// Credentials come from LIVESYNC_TEST_COUCHDB_USER and _PASSWORD.
//
// load creates the database and writes -docs chunk documents
// ({"_id":"h:…","type":"leaf","data":<size bytes>}, new_edits=false) in
// _bulk_docs requests of 500. pull runs one cold pull to quiescence —
// adapters/couchdb + replicate.Pull into a fresh store.NewMemory, batch
// size -batch, batches limit -limit — and prints one JSON line: docs
// written, milliseconds, docs/s and the process's peak RSS (VmHWM).
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/engine/replicate"
	"github.com/livesync-go/livesync-go/engine/store"
)

func main() {
	if len(os.Args) < 2 {
		fail(fmt.Errorf("usage: gopull load|pull -url URL -db NAME …"))
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	url := fs.String("url", "", "server URL")
	name := fs.String("db", "", "database")
	docs := fs.Int("docs", 10000, "documents to load")
	size := fs.Int("size", 1024, "bytes of data per document")
	batch := fs.Int("batch", 25, "batch_size")
	limit := fs.Int("limit", 25, "batches_limit")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the pull")
	conns := fs.Int("conns", 0, "idle connections kept per host (0: the adapter's default)")
	latency := fs.Duration("latency", 0, "added before every request, as a round trip over a slow link")
	_ = fs.Parse(os.Args[2:])
	var client *http.Client
	if *conns > 0 || *latency > 0 {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 32
		if *conns > 0 {
			tr.MaxIdleConnsPerHost = *conns
		}
		client = &http.Client{Transport: slowLink{tr, *latency}}
	}
	db, err := couchdb.New(couchdb.Config{URL: *url, Database: *name, HTTPClient: client,
		User: os.Getenv("LIVESYNC_TEST_COUCHDB_USER"), Password: os.Getenv("LIVESYNC_TEST_COUCHDB_PASSWORD")})
	if err != nil {
		fail(err)
	}
	defer db.Close()
	ctx := context.Background()
	switch os.Args[1] {
	case "load":
		fail(load(ctx, db, *docs, *size))
	case "pull":
		fail(pull(ctx, db, *batch, *limit, *cpuprofile))
	default:
		fail(fmt.Errorf("unknown command %q", os.Args[1]))
	}
}

// slowLink delays every request by d.
type slowLink struct {
	next http.RoundTripper
	d    time.Duration
}

func (s slowLink) RoundTrip(r *http.Request) (*http.Response, error) {
	time.Sleep(s.d)
	return s.next.RoundTrip(r)
}

func load(ctx context.Context, db *couchdb.DB, n, size int) error {
	if err := db.Create(ctx); err != nil {
		return err
	}
	alpha := []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
	var page []json.RawMessage
	for i := range n {
		b := make([]byte, size)
		_, _ = rand.Read(b)
		for j := range b {
			b[j] = alpha[b[j]%64]
		}
		rev := make([]byte, 16)
		_, _ = rand.Read(rev)
		doc, _ := json.Marshal(map[string]any{
			"_id": fmt.Sprintf("h:bench%06d", i), "_rev": "1-" + hex.EncodeToString(rev),
			"type": "leaf", "data": string(b),
		})
		page = append(page, doc)
		if len(page) == 500 || i == n-1 {
			res, err := db.BulkDocs(ctx, page)
			if err != nil {
				return err
			}
			for _, r := range res {
				if r.Error != "" {
					return fmt.Errorf("load %s: %s %s", r.ID, r.Error, r.Reason)
				}
			}
			page = page[:0]
		}
	}
	info, err := db.Info(ctx)
	if err != nil {
		return err
	}
	if info.DocCount != int64(n) {
		return fmt.Errorf("loaded %d documents, the server counts %d", n, info.DocCount)
	}
	return nil
}

func pull(ctx context.Context, db *couchdb.DB, batch, limit int, cpuprofile string) error {
	local, err := store.NewMemory(store.Options{Name: "bench-local"})
	if err != nil {
		return err
	}
	defer local.Close()
	id := make([]byte, 8)
	_, _ = rand.Read(id)
	r, err := replicate.New(replicate.Config{Local: local, Remote: db, BatchSize: batch, BatchesLimit: limit,
		LocalID: "bench-" + hex.EncodeToString(id), RemoteID: db.Name()})
	if err != nil {
		return err
	}
	defer r.Close()
	if cpuprofile != "" {
		f, err := os.Create(cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	var cpu0 time.Duration = cpuTime()
	start := time.Now()
	res, err := r.Pull(ctx)
	el := time.Since(start)
	cpu := cpuTime() - cpu0
	if err != nil {
		return err
	}
	info, err := local.Info(ctx)
	if err != nil {
		return err
	}
	if res.Pull.WriteFailures > 0 {
		return fmt.Errorf("%d write failures", res.Pull.WriteFailures)
	}
	out, _ := json.Marshal(map[string]any{
		"docs": res.Pull.DocsWritten, "docCount": info.DocCount, "ms": float64(el.Microseconds()) / 1000,
		"docsPerSec": float64(res.Pull.DocsWritten) / el.Seconds(), "peakRssKiB": vmHWM(),
		"cpuMs": cpu.Milliseconds(), "batchSize": batch, "batchesLimit": limit, "go": runtime.Version(),
	})
	fmt.Println(string(out))
	return nil
}

var hwm = regexp.MustCompile(`VmHWM:\s+(\d+) kB`)

func vmHWM() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	m := hwm.FindSubmatch(b)
	if m == nil {
		return 0
	}
	n, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return n
}

// cpuTime is the process's user+system CPU time (/proc/self/stat, in
// clock ticks of 10 ms).
func cpuTime() time.Duration {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0
	}
	// Fields after the ")" of the command name: state is field 3; utime 14, stime 15.
	i := len(b) - 1
	for i >= 0 && b[i] != ')' {
		i--
	}
	var f []string
	cur := ""
	for _, c := range string(b[i+2:]) {
		if c == ' ' {
			f = append(f, cur)
			cur = ""
			continue
		}
		cur += string(c)
	}
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}

func fail(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "gopull:", err)
		os.Exit(1)
	}
}
