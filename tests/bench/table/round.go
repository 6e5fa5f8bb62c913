//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// key names one measurement: row, server, side ("ours" or "ref").
func key(row string, srv *server, side string) string { return pk(row, srv) + "|" + side }

// pk is the prefix of a row's keys on srv.
func pk(row string, srv *server) string { return row + "|" + srv.name }

// round measures, against srv, the pulls, the pushes and the import,
// each of ours followed by PouchDB's.
func (b *bench) round(srv *server, r int) error {
	if !b.o.skip["pull"] {
		if err := b.pulls(srv, r); err != nil {
			return err
		}
	}
	if !b.o.skip["push"] {
		for _, order := range []string{"chunks", "metadata"} {
			if err := b.push(srv, r, order); err != nil {
				return err
			}
		}
	}
	if !b.o.skip["import"] {
		if err := b.importRow(srv, r); err != nil {
			return err
		}
	}
	return nil
}

// pulls: a whole `livesync pull` process into a new bbolt store; then,
// at 25/25 and at 100/10, the replicator alone (gopull, into memory) and
// PouchDB (replicate.mjs, into memory).
func (b *bench) pulls(srv *server, r int) error {
	store := b.path(fmt.Sprintf("pull-%s-%d.db", srv.name[:5], r))
	p, err := b.livesync(srv, "pull", srv.remote("src"), "--store", store, "--quiet", "--json")
	os.Remove(store)
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
	b.res.add(key("pull-user", srv, "ours"), float64(out.Pulled.DocsWritten)/(p.wallMs/1000))
	b.res.add(key("pull-user", srv, "rss"), float64(p.maxRssKiB))
	for _, s := range [][2]string{{"25", "25"}, {"100", "10"}} {
		row := "pull-" + s[0] + "-" + s[1]
		g, err := runProc(as(srv), b.o.exe("gopull"), "pull", "-url", srv.url, "-db", "src", "-batch", s[0], "-limit", s[1])
		if err != nil {
			return err
		}
		var gr struct{ DocsPerSec float64 }
		if err := lastJSON(g.out, &gr); err != nil {
			return err
		}
		b.res.add(key(row, srv, "ours"), gr.DocsPerSec)
		pp, err := runProc(as(srv), b.o.node, filepath.Join(b.o.root, "tests/pouchdb/replicate.mjs"), "--url", srv.url,
			"--db", "src", "--batch-size", s[0], "--batches-limit", s[1], "--stats")
		if err != nil {
			return err
		}
		var pr struct{ DocsPerSec float64 }
		if err := lastJSON(pp.out, &pr); err != nil {
			return err
		}
		b.res.add(key(row, srv, "ref"), pr.DocsPerSec)
		if s[0] == "25" {
			// The user's pull is compared with PouchDB at LiveSync's settings.
			b.res.add(key("pull-user", srv, "ref"), pr.DocsPerSec)
		}
	}
	return nil
}

// push: `livesync push` of the local replica whose changes have the
// chunks (or the metadata) first into a new database, then PouchDB's
// push of the same documents in the same order; with the server's CPU
// time, and for ours whether every document is visible when it returns.
func (b *bench) push(srv *server, r int, order string) error {
	row := "push-" + order
	db := fmt.Sprintf("push-%s-%d", order, r)
	if err := srv.create(db); err != nil {
		return err
	}
	c0 := srv.cpuMs()
	p, err := b.livesync(srv, "push", srv.remote(db), "--store", b.path(order+"-first.db"), "--quiet", "--json")
	c1 := srv.cpuMs()
	if err != nil {
		return err
	}
	n, err := srv.docCount(db)
	if err != nil {
		return err
	}
	b.res.add(key(row, srv, "missing"), float64(b.srcDocs-n))
	if n < b.srcDocs {
		logf("  %d of %d documents not visible when the push returned", b.srcDocs-n, b.srcDocs)
		// How long until the rest shows (held notes released late).
		t0 := time.Now()
		for n < b.srcDocs && time.Since(t0) < 30*time.Second {
			time.Sleep(50 * time.Millisecond)
			if n, err = srv.docCount(db); err != nil {
				return err
			}
		}
		b.res.add(key(row, srv, "lateMs"), float64(time.Since(t0).Milliseconds()))
		logf("  %d visible after %v", n, time.Since(t0))
	}
	srv.drop(db)
	b.res.add(key(row, srv, "ours"), float64(b.srcDocs)/(p.wallMs/1000))
	b.res.add(key(row, srv, "cpu-ours"), c1-c0)

	db = fmt.Sprintf("pouch-%s-%d", order, r)
	if err := srv.create(db); err != nil {
		return err
	}
	c0 = srv.cpuMs()
	pr, err := b.pouchPush(srv, db, order)
	c1 = srv.cpuMs()
	srv.drop(db)
	if err != nil {
		return err
	}
	b.res.add(key(row, srv, "ref"), pr["docsPerSec"].(float64))
	b.res.add(key(row, srv, "cpu-ref"), c1-c0)
	return nil
}

// importRow: `livesync import` of the folder into a new database (a whole
// process, into a new local store), against PouchDB's push of the same
// documents (chunks first, as import writes them).
func (b *bench) importRow(srv *server, r int) error {
	db := fmt.Sprintf("import-%d", r)
	store := b.path(fmt.Sprintf("import-%s-%d.db", srv.name[:5], r))
	p, err := b.livesync(srv, "import", b.vault(), srv.remote(db), "--store", store, "--quiet", "--json")
	os.Remove(store)
	srv.drop(db)
	if err != nil {
		return err
	}
	b.res.add(key("import", srv, "ours"), float64(b.srcDocs)/(p.wallMs/1000))
	db = fmt.Sprintf("pouch-import-%d", r)
	if err := srv.create(db); err != nil {
		return err
	}
	pr, err := b.pouchPush(srv, db, "chunks")
	srv.drop(db)
	if err != nil {
		return err
	}
	b.res.add(key("import", srv, "ref"), pr["docsPerSec"].(float64))
	return nil
}
