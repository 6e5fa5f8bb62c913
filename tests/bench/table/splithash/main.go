// Command splithash times what `livesync import` does to a note before
// anything is sent: split it into chunks (engine/chunk, LiveSync's
// default V3 Rabin–Karp splitter) and compute each chunk's id
// (engine/chunkid, xxhash64, no encryption). The JavaScript counterpart is
// tests/bench/table/splithash.mjs (the same splitter as LiveSync's
// commonlib, with octagonal-wheels' xxhash).
//
//	splithash -dir VAULT [-min 1s]
//
// It reads every file of VAULT, then splits and hashes all of them again
// and again for at least -min, and prints one JSON line: notes/s, MB/s,
// the number of chunks of one pass and a digest of their ids (equal to
// the JavaScript side's when both split and hash alike).
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/livesync-go/livesync-go/engine/chunk"
	"github.com/livesync-go/livesync-go/engine/chunkid"
)

type file struct {
	path string
	data []byte
}

func main() {
	dir := flag.String("dir", "", "vault folder")
	minDur := flag.Duration("min", time.Second, "minimum time to measure")
	flag.Parse()
	var files []file
	var bytes int
	err := filepath.WalkDir(*dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(*dir, p)
		files = append(files, file{filepath.ToSlash(rel), b})
		bytes += len(b)
		return err
	})
	if err != nil {
		fail(err)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].path < files[j].path })
	h, err := chunkid.New(chunkid.XXHash64, false, "")
	if err != nil {
		fail(err)
	}
	settings := chunk.Settings{Splitter: chunk.V3RabinKarp, CustomChunkSize: 60}
	pass := func(ids func(string)) {
		for _, f := range files {
			err := chunk.SplitFunc(f.path, f.data, true, settings, func(piece string) bool {
				ids(h.ID(piece))
				return true
			})
			if err != nil {
				fail(err)
			}
		}
	}
	sum := sha256.New()
	chunks := 0
	pass(func(id string) { chunks++; sum.Write([]byte(id + "\n")) })
	n := 0
	start := time.Now()
	for n == 0 || time.Since(start) < *minDur {
		pass(func(string) {})
		n++
	}
	s := time.Since(start).Seconds()
	out, _ := json.Marshal(map[string]any{"impl": "go", "notesPerSec": float64(n*len(files)) / s,
		"mbPerSec": float64(n*bytes) / s / 1e6, "chunks": chunks, "idsDigest": hex.EncodeToString(sum.Sum(nil))[:16]})
	fmt.Println(string(out))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "splithash:", err)
	os.Exit(1)
}
