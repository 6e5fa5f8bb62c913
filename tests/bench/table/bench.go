//go:build linux

package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
)

// results holds every measurement by key (row|server|side).
type results map[string][]float64

func (r results) add(key string, v float64) { r[key] = append(r[key], v) }

type bench struct {
	o            options
	couch, relay *server
	res          results
	// srcDocs is the number of documents of the source vault.
	srcDocs int
	// notes about what could not be measured, printed under the table.
	notes []string
}

func (b *bench) vault() string        { return filepath.Join(b.o.work, "vault") }
func (b *bench) path(s string) string { return filepath.Join(b.o.work, s) }

// livesync runs the CLI against srv.
func (b *bench) livesync(srv *server, args ...string) (proc, error) {
	return runProc([]string{"LIVESYNC_PASSWORD=" + srv.password, "LIVESYNC_CONFIG=" + b.path("none.toml")},
		b.o.exe("livesync"), args...)
}

// as is the environment naming srv's credentials for gopull and the
// PouchDB scripts.
func as(srv *server) []string {
	return []string{"LIVESYNC_TEST_COUCHDB_USER=" + srv.user, "LIVESYNC_TEST_COUCHDB_PASSWORD=" + srv.password}
}

// setup writes the vault folder, imports it into the test server's "src"
// (the source of every pull and push), copies it to the relay's "src",
// makes a metadata-first copy on the test server, and pulls the two local
// replicas `livesync push` sends: one whose changes have the chunks first,
// one with the metadata first.
func (b *bench) setup() error {
	// An empty configuration: the user's own is not read.
	if err := os.WriteFile(b.path("none.toml"), nil, 0o600); err != nil {
		return err
	}
	if err := writeVault(b.vault(), b.o.notes, 1); err != nil {
		return err
	}
	logf("setup: importing %d notes into the test server", b.o.notes)
	if _, err := b.livesync(b.couch, "import", b.vault(), b.couch.remote("src"), "--store", b.path("setup-import.db"), "--quiet", "--json"); err != nil {
		return err
	}
	n, err := b.couch.docCount("src")
	if err != nil {
		return err
	}
	b.srcDocs = n
	logf("setup: %d documents; copying them to the relay and a metadata-first copy", n)
	// The documents PouchDB pushes, read once (replicate.mjs --out).
	if _, err := runProc(as(b.couch), b.o.node, filepath.Join(b.o.root, "tests/pouchdb/replicate.mjs"),
		"--url", b.couch.url, "--db", "src", "--out", b.path("src.json")); err != nil {
		return err
	}
	if err := b.relay.create("src"); err != nil {
		return err
	}
	if _, err := b.pouchPush(b.relay, "src", "chunks"); err != nil {
		return err
	}
	if err := b.couch.create("srcmeta"); err != nil {
		return err
	}
	if _, err := b.pouchPush(b.couch, "srcmeta", "metadata"); err != nil {
		return err
	}
	for name, db := range map[string]string{"chunks-first.db": "src", "metadata-first.db": "srcmeta"} {
		if _, err := b.livesync(b.couch, "pull", b.couch.remote(db), "--store", b.path(name), "--quiet", "--json"); err != nil {
			return err
		}
	}
	return nil
}

// pouchPush pushes the source vault's documents with PouchDB into db on
// srv, in the given order (chunks or metadata first).
func (b *bench) pouchPush(srv *server, db, order string) (map[string]any, error) {
	env := []string{"PUSH_USER=" + srv.user, "PUSH_PASSWORD=" + srv.password}
	p, err := runProc(env, b.o.node, filepath.Join(b.o.root, "tests/bench/table/pushdocs.mjs"),
		"--from", "file:"+b.path("src.json"), "--to", srv.url+"/"+db, "--order", order)
	if err != nil {
		return nil, err
	}
	var r map[string]any
	return r, lastJSON(p.out, &r)
}

// writeVault writes n notes of about 1 KiB of text (words from a fixed
// list, deterministic for a seed) into dir, 20 to a folder.
func writeVault(dir string, n int, seed uint64) error {
	words := strings.Fields("the a of to and in sync vault note chunk relay replica pull push import couch pouch " +
		"merge conflict revision document journal bucket passphrase device plugin markdown heading list link tag " +
		"obsidian garden meeting project idea draft todo done later review weekly daily summary")
	rng := rand.New(rand.NewPCG(seed, 7))
	for i := range n {
		var sb strings.Builder
		fmt.Fprintf(&sb, "# Note %d\n\n", i)
		for sb.Len() < 1000 {
			for j := 0; j < 10; j++ {
				sb.WriteString(words[rng.IntN(len(words))])
				sb.WriteByte(' ')
			}
			fmt.Fprintf(&sb, "%d\n", rng.Uint32())
		}
		d := filepath.Join(dir, fmt.Sprintf("folder%02d", i%20))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("note%05d.md", i)), []byte(sb.String()), 0o644); err != nil {
			return err
		}
	}
	return nil
}
