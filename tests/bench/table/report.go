//go:build linux

package main

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"time"
)

func median(xs []float64) (float64, bool) {
	if len(xs) == 0 {
		return 0, false
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2], true
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2, true
}

// row is one line of the table.
type row struct{ what, ours, ref, ratio, goal, met string }

// goal is a minimum (or, with max, a maximum) ratio; zero: none.
type goal struct {
	v   float64
	max bool
}

func (g goal) String() string {
	switch {
	case g.v == 0:
		return "—"
	case g.max:
		return fmt.Sprintf("≤ %.1f×", g.v)
	}
	return fmt.Sprintf("≥ %g×", g.v)
}

func (g goal) met(ratio float64) string {
	switch {
	case g.v == 0:
		return "—"
	case g.max && ratio <= g.v, !g.max && ratio >= g.v:
		return "yes"
	}
	return "**no**"
}

// ratioRow compares the medians of ours and ref (higher is better, unit
// after each figure).
func (b *bench) ratioRow(what, k string, unit string, g goal) (row, bool) {
	o, ok1 := median(b.res[k+"|ours"])
	r, ok2 := median(b.res[k+"|ref"])
	if !ok1 || !ok2 || r == 0 {
		return row{}, false
	}
	return row{what, fmt.Sprintf("%.0f %s", o, unit), fmt.Sprintf("%.0f %s", r, unit),
		fmt.Sprintf("%.2f×", o/r), g.String(), g.met(o / r)}, true
}

func (b *bench) rows() []row {
	var rows []row
	add := func(r row, ok bool) {
		if ok {
			rows = append(rows, r)
		}
	}
	for _, srv := range []*server{b.relay, b.couch} {
		userGoal := goal{v: 3}
		if srv == b.relay {
			userGoal = goal{v: 5}
		}
		add(b.ratioRow("pull from the "+srv.name+", as a user runs it: a `livesync pull` process (the engine's defaults) → bbolt, vs PouchDB 25/25 → memory",
			pk("pull-user", srv), "docs/s", userGoal))
		add(b.ratioRow("pull from the "+srv.name+", replication alone → memory, 25/25", pk("pull-25-25", srv), "docs/s", goal{}))
		add(b.ratioRow("pull from the "+srv.name+", replication alone → memory, 100/10", pk("pull-100-10", srv), "docs/s", goal{}))
		for _, order := range []string{"chunks", "metadata"} {
			add(b.ratioRow(fmt.Sprintf("push into the %s, %s first: `livesync push` vs PouchDB replicate.to 25/25", srv.name, order),
				pk("push-"+order, srv), "docs/s", goal{v: 5}))
		}
		add(b.cpuRow(srv))
		add(b.ratioRow(fmt.Sprintf("import of %d notes into the %s: `livesync import` end to end vs PouchDB pushing the same documents", b.o.notes, srv.name),
			pk("import", srv), "docs/s", goal{v: 3}))
	}
	for _, e := range []struct{ what, k string }{
		{"E2EE decrypt, 1 KiB chunks, one at a time: engine/e2ee vs octagonal-wheels", "e2ee|decrypt|1024|seq|"},
		{"E2EE decrypt, 1 KiB chunks, 40 in flight", "e2ee|decrypt|1024|conc40|"},
		{"E2EE decrypt, 1 MiB chunks, one at a time", "e2ee|decrypt|1048576|seq|"},
	} {
		add(b.ratioRow(e.what, e.k[:len(e.k)-1], "chunks/s", goal{}))
	}
	add(b.ratioRow(fmt.Sprintf("split + hash of the %d notes (V3 Rabin–Karp, xxhash64 ids, the same ids): engine/chunk+chunkid vs LiveSync's splitter with octagonal-wheels", b.o.notes),
		"splithash", "notes/s", goal{}))
	if p99, ok := median(b.res["scaleout|p99"]); ok {
		d, _ := median(b.res["scaleout|docs"])
		met := "yes"
		if p99 >= 100 {
			met = "**no**"
		}
		rows = append(rows, row{fmt.Sprintf("the relay under 20 LiveSync-configured PouchDB clients (%d E2EE notes): client p99", b.o.scaleNotes),
			fmt.Sprintf("%.0f ms (%.0f docs/s)", p99, d), "—", "—", "< 100 ms", met})
	}
	rows = append(rows, b.scaleRows()...)
	return rows
}

// cpuRow: the server's CPU for our metadata-first push against our
// chunks-first push, and whether every document was visible when the
// metadata-first push returned.
func (b *bench) cpuRow(srv *server) (row, bool) {
	m, ok1 := median(b.res[key("push-metadata", srv, "cpu-ours")])
	c, ok2 := median(b.res[key("push-chunks", srv, "cpu-ours")])
	if !ok1 || !ok2 || c == 0 || srv != b.relay {
		return row{}, false
	}
	missing := slices.Max(b.res[key("push-metadata", srv, "missing")])
	g := goal{v: 1.3, max: true}
	met := g.met(m / c)
	if missing > 0 {
		late, _ := median(b.res[key("push-metadata", srv, "lateMs")])
		met = fmt.Sprintf("**no** (%.0f documents not visible when the push returned, %.1f s later)", missing, late/1000)
	}
	return row{"relay CPU of a metadata-first `livesync push` vs a chunks-first one; every document visible when it returns",
		fmt.Sprintf("%.2f s", m/1000), fmt.Sprintf("%.2f s", c/1000), fmt.Sprintf("%.2f×", m/c), g.String(), met}, true
}

// scaleRows: the pull's cost per document at each size against the
// smallest, and its peak RSS.
func (b *bench) scaleRows() []row {
	var rows []row
	base := 0.0
	for _, n := range b.o.scale {
		ms, ok := median(b.res[fmt.Sprintf("scale|%d|msPer1k", n)])
		if !ok {
			continue
		}
		rss, _ := median(b.res[fmt.Sprintf("scale|%d|rss", n)])
		if base == 0 {
			base = ms
		}
		g := goal{v: 1.5, max: true}
		rows = append(rows, row{fmt.Sprintf("pull cost per document at %d chunk documents (`livesync pull` from the relay → bbolt); peak RSS", n),
			fmt.Sprintf("%.0f ms per 1k docs; %.0f MiB", ms, rss/1024), fmt.Sprintf("%.0f ms per 1k docs (at %d)", base, b.o.scale[0]),
			fmt.Sprintf("%.2f×", ms/base), "flat (" + g.String() + ")", g.met(ms / base)})
	}
	return rows
}

func (b *bench) report(w io.Writer) {
	fmt.Fprintf(w, "\n%s: %d notes (%d documents) of about 1 KiB, %d round(s) interleaved (medians); %s, %d CPUs\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), b.o.notes, b.srcDocs, b.o.runs, runtime.Version(), runtime.NumCPU())
	fmt.Fprintln(w, "| what | ours | reference | ratio | goal | met? |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---|---|")
	for _, r := range b.rows() {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", r.what, r.ours, r.ref, r.ratio, r.goal, r.met)
	}
	for _, n := range b.notes {
		fmt.Fprintf(w, "\n- %s", n)
	}
	fmt.Fprintln(w)
}
