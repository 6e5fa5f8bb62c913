//go:build linux

// Command benchtable measures livesync-go against PouchDB 9 and
// octagonal-wheels in one run and prints a markdown table of ratios
// (tests/bench/table/run.sh builds it and starts the servers).
//
//	benchtable -bin DIR -work DIR [-notes 2000] [-runs 3] [-scale 1000,10000,100000]
//
// DIR holds the binaries run.sh built (livesync, livesync-relay, gopull,
// scaleoutbench). The CouchDB-protocol test server is the one
// LIVESYNC_TEST_COUCHDB_URL, _USER, _PASSWORD and COUCHSERVER_PID name; the
// relay is started here on a data folder under -work.
//
// A vault folder of -notes notes of about 1 KiB is imported once into the
// test server ("src"), which is the source of every pull and push. Each of
// -runs rounds then measures, on both servers, one after the other (never
// two at a time): pulls (a whole `livesync pull` process into its bbolt
// store; the replicator alone into memory, gopull, at 25/25 and 100/10;
// PouchDB replicate.from into memory at the same settings), pushes of the
// same documents chunks first and metadata first (`livesync push` of a
// local replica against PouchDB replicate.to at 25/25, with the server's
// CPU time), and `livesync import` of the folder against PouchDB's push of
// the documents that import makes. Each push or import goes into a new
// database, deleted afterwards. After the first round, once: the E2EE
// benchmark (tests/bench/e2ee), the relay under 20 PouchDB clients
// (tests/bench/scaleout, SETUPS=bbolt) and the pull's cost per document at
// the -scale sizes. With -budget, no section starts after that long (the
// first round always runs); what was left out is listed under the table.
// Progress goes to stderr; the table to stdout.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

type options struct {
	bin, work, root, node string
	notes, runs           int
	scale                 []int
	e2eeMin               string
	e2eeRuns              int
	scaleNotes            int
	skip                  map[string]bool
	// deadline: sections not started by then are left out (and named
	// under the table), so that a bounded run still prints its table.
	deadline   time.Time
	resultsOut string
}

func main() {
	var o options
	var scale, skip string
	flag.StringVar(&o.bin, "bin", "", "folder of the built binaries")
	flag.StringVar(&o.work, "work", "", "scratch folder (vault, stores, relay data)")
	flag.StringVar(&o.node, "node", "node", "node")
	flag.IntVar(&o.notes, "notes", 2000, "notes in the vault (about 5 documents each)")
	flag.IntVar(&o.runs, "runs", 3, "interleaved rounds; the table shows medians")
	flag.StringVar(&scale, "scale", "1000,10000", "document counts of the pull-cost curve")
	flag.StringVar(&o.e2eeMin, "e2ee-min", "1.5", "BENCH_MIN_SECONDS of the E2EE benchmark")
	flag.IntVar(&o.e2eeRuns, "e2ee-runs", 3, "RUNS of the E2EE benchmark")
	flag.IntVar(&o.scaleNotes, "scaleout-notes", 300, "NOTES of the 20-client benchmark")
	flag.StringVar(&skip, "skip", "", "sections left out: pull,push,import,e2ee,splithash,scaleout,scale")
	budget := flag.Duration("budget", 0, "start no section after this long (0: no limit)")
	flag.StringVar(&o.resultsOut, "results", "", "also write every measurement, by key, as JSON to this file")
	flag.Parse()
	if *budget > 0 {
		o.deadline = time.Now().Add(*budget)
	}
	o.root, _ = os.Getwd()
	o.skip = map[string]bool{}
	for _, s := range strings.Split(skip, ",") {
		o.skip[strings.TrimSpace(s)] = true
	}
	for _, s := range strings.Split(scale, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(s)); err == nil && n > 0 {
			o.scale = append(o.scale, n)
		}
	}
	if o.bin == "" || o.work == "" || os.Getenv("LIVESYNC_TEST_COUCHDB_URL") == "" {
		fail(errors.New("usage: benchtable -bin DIR -work DIR (with the test server's LIVESYNC_TEST_COUCHDB_* and COUCHSERVER_PID: see run.sh)"))
	}
	if err := run(o); err != nil {
		fail(err)
	}
}

func run(o options) error {
	couch := &server{name: "test server", url: strings.TrimRight(os.Getenv("LIVESYNC_TEST_COUCHDB_URL"), "/"),
		user: os.Getenv("LIVESYNC_TEST_COUCHDB_USER"), password: os.Getenv("LIVESYNC_TEST_COUCHDB_PASSWORD")}
	couch.pid, _ = strconv.Atoi(os.Getenv("COUCHSERVER_PID"))
	relay, err := startRelay(o)
	if err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	defer relay.stop()
	b := &bench{o: o, couch: couch, relay: &relay.server, res: results{}}
	if err := b.setup(); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	// Round 1, then the once-only sections, then the other rounds: a run
	// cut short by its time budget still has every row.
	for r := 1; r <= o.runs; r++ {
		for _, srv := range []*server{b.relay, b.couch} {
			if r > 1 && b.late(fmt.Sprintf("round %d on the %s", r, srv.name)) {
				continue
			}
			logf("round %d/%d, %s", r, o.runs, srv.name)
			if err := b.round(srv, r); err != nil {
				return fmt.Errorf("round %d, %s: %w", r, srv.name, err)
			}
		}
		if r == 1 {
			b.others()
		}
	}
	b.report(os.Stdout)
	if o.resultsOut != "" {
		j, _ := json.MarshalIndent(b.res, "", "\t")
		return os.WriteFile(o.resultsOut, j, 0o644)
	}
	return nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "benchtable:", err)
	os.Exit(1)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "benchtable: "+format+"\n", args...)
}

// path of a built binary.
func (o options) exe(name string) string { return filepath.Join(o.bin, name) }

// late reports whether the time budget is spent, noting what is left out.
func (b *bench) late(what string) bool {
	if b.o.deadline.IsZero() || time.Now().Before(b.o.deadline) {
		return false
	}
	b.notes = append(b.notes, what+": left out (time budget spent)")
	return true
}
