//go:build linux

package main

import (
	"bufio"
	"bytes"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// others runs, once each, the measurements that are not per server: the
// E2EE benchmark, the relay under 20 clients, the pull-cost curve. A
// failure there is noted under the table, not fatal.
func (b *bench) others() {
	steps := []struct {
		name string
		f    func() error
	}{{"splithash", b.splitHash}, {"e2ee", b.e2ee}, {"scaleout", b.scaleout}, {"scale", b.scaleCurve}}
	for _, s := range steps {
		if b.o.skip[s.name] || b.late(s.name) {
			continue
		}
		logf("%s", s.name)
		if err := s.f(); err != nil {
			logf("%s failed: %v", s.name, err)
			b.notes = append(b.notes, fmt.Sprintf("%s: not measured (%v)", s.name, firstLine(err.Error())))
		}
	}
}

func firstLine(s string) string {
	if i := bytes.IndexByte([]byte(s), '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// e2ee runs tests/bench/e2ee/run.sh and keeps its machine-readable
// lines: Go's and octagonal-wheels' chunks/s per operation.
func (b *bench) e2ee() error {
	out := b.path("e2ee.jsonl")
	_, err := runProc([]string{"RUNS=" + strconv.Itoa(b.o.e2eeRuns), "BENCH_MIN_SECONDS=" + b.o.e2eeMin, "RESULTS_OUT=" + out},
		"sh", filepath.Join(b.o.root, "tests/bench/e2ee/run.sh"))
	if err != nil {
		return err
	}
	f, err := os.ReadFile(out)
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(bytes.NewReader(f))
	for sc.Scan() {
		var r struct {
			Impl, Op, Mode string
			Size           int
			ChunksPerSec   *float64
		}
		if json.Unmarshal(sc.Bytes(), &r) != nil || r.ChunksPerSec == nil {
			continue
		}
		side := map[string]string{"go": "ours", "js": "ref"}[r.Impl]
		if side == "" {
			continue
		}
		b.res.add(fmt.Sprintf("e2ee|%s|%d|%s|%s", r.Op, r.Size, r.Mode, side), *r.ChunksPerSec)
	}
	return nil
}

// scaleout runs tests/bench/scaleout's single-relay setup (bbolt): 20
// LiveSync-configured PouchDB clients catching up and following.
func (b *bench) scaleout() error {
	p, err := runProc(nil, b.o.exe("scaleoutbench"), "-relay", b.o.exe("livesync-relay"),
		"-script", filepath.Join(b.o.root, "tests/pouchdb/livesync-load.mjs"), "-notes", strconv.Itoa(b.o.scaleNotes),
		"-clients", "20", "-procs", "6", "-setups", "bbolt")
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(bytes.NewReader(p.out))
	for sc.Scan() {
		var r struct {
			Setup     string
			DocsPerS  float64 `json:"docsPerSec"`
			P99Ms     float64 `json:"p99Ms"`
			Clients   int
			Violation int `json:"violations"`
		}
		if json.Unmarshal(sc.Bytes(), &r) == nil && r.Setup == "bbolt" {
			b.res.add("scaleout|docs", r.DocsPerS)
			b.res.add("scaleout|p99", r.P99Ms)
			return nil
		}
	}
	return fmt.Errorf("no result line from scaleoutbench")
}

// scaleCurve: for each size, a relay database with a small vault plus
// that many chunk documents, pulled by a whole `livesync pull` process
// into a new bbolt store: milliseconds per 1,000 documents and peak RSS.
func (b *bench) scaleCurve() error {
	tiny := b.path("tiny")
	if err := writeVault(tiny, 10, 2); err != nil {
		return err
	}
	for _, n := range b.o.scale {
		db := fmt.Sprintf("scale-%d", n)
		if _, err := b.livesync(b.relay, "import", tiny, b.relay.remote(db), "--store", b.path(db+"-import.db"), "--quiet"); err != nil {
			return err
		}
		if err := loadChunks(b.relay, db, n); err != nil {
			return err
		}
		store := b.path(db + "-pull.db")
		p, err := b.livesync(b.relay, "pull", b.relay.remote(db), "--store", store, "--quiet", "--json")
		os.Remove(store)
		b.relay.drop(db)
		if err != nil {
			return err
		}
		var out struct {
			Pulled struct {
				DocsWritten int `json:"docs_written"`
			} `json:"pulled"`
		}
		if err := lastJSON(p.out, &out); err != nil {
			return err
		}
		b.res.add(fmt.Sprintf("scale|%d|msPer1k", n), p.wallMs/float64(out.Pulled.DocsWritten)*1000)
		b.res.add(fmt.Sprintf("scale|%d|rss", n), float64(p.maxRssKiB))
		logf("scale %d: %d docs in %.0f ms, peak RSS %d KiB", n, out.Pulled.DocsWritten, p.wallMs, p.maxRssKiB)
	}
	return nil
}

// loadChunks writes n chunk documents of 1 KiB of text into db with
// _bulk_docs (new_edits=false), 500 to a request.
func loadChunks(srv *server, db string, n int) error {
	const alpha = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	for i := 0; i < n; i += 500 {
		var docs []map[string]any
		for j := i; j < min(n, i+500); j++ {
			data := make([]byte, 1024)
			_, _ = crand.Read(data)
			for k := range data {
				data[k] = alpha[data[k]%64]
			}
			rev := make([]byte, 16)
			_, _ = crand.Read(rev)
			docs = append(docs, map[string]any{"_id": fmt.Sprintf("h:scale%07d", j), "_rev": "1-" + hex.EncodeToString(rev),
				"type": "leaf", "data": string(data)})
		}
		body, _ := json.Marshal(map[string]any{"docs": docs, "new_edits": false})
		code, resp, err := srv.do("POST", "/"+db+"/_bulk_docs", body)
		if err != nil {
			return err
		}
		if code != 201 && code != 200 {
			return fmt.Errorf("_bulk_docs: %d %.300s", code, resp)
		}
	}
	return nil
}

// splitHash splits the vault's notes and hashes their chunks with
// splithash (engine/chunk + engine/chunkid) and with splithash.mjs
// (LiveSync's splitter + octagonal-wheels' xxhash), and checks that both
// made the same chunk ids.
func (b *bench) splitHash() error {
	type res struct {
		NotesPerSec float64
		IdsDigest   string
		Chunks      int
	}
	var got [2]res
	for i, c := range [][]string{
		{b.o.exe("splithash"), "-dir", b.vault(), "-min", b.o.e2eeMin + "s"},
		{b.o.node, filepath.Join(b.o.root, "tests/bench/table/splithash.mjs"), "--dir", b.vault(), "--min", b.o.e2eeMin},
	} {
		p, err := runProc(nil, c[0], c[1:]...)
		if err != nil {
			return err
		}
		if err := lastJSON(p.out, &got[i]); err != nil {
			return err
		}
	}
	if got[0].IdsDigest != got[1].IdsDigest {
		b.notes = append(b.notes, fmt.Sprintf("split+hash: the chunk ids differ (Go %d chunks, JS %d)", got[0].Chunks, got[1].Chunks))
	}
	b.res.add("splithash|ours", got[0].NotesPerSec)
	b.res.add("splithash|ref", got[1].NotesPerSec)
	return nil
}
