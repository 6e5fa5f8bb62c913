package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/docid"
	"github.com/livesync-go/livesync-go/engine/fetch"
	"github.com/livesync-go/livesync-go/engine/hold"
	"github.com/livesync-go/livesync-go/engine/hunt"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/store"
)

// A file is held when the replica has its metadata but not all of its
// chunks (a metadata-only pull, an interrupted one, or chunks that never
// reached the remote): it cannot be read or exported until they arrive.
// The replica itself says which files are held; the CLI adds what it
// cannot say, in the _local document heldLocalID: since when each file
// is held and which remote its metadata came from (recorded by the pull
// that brought it), and what the last hunt for its chunks found.
//
// The CLI keeps no purgatory running between commands: nothing is hunted
// in the background, so there is never a next attempt scheduled.
// "livesync hunt --retry" hunts at once through engine/hunt, with its
// per-source throttle, on every remote that can fetch chunks by id.

// heldLocalID is the _local document (not replicated) holding the CLI's
// record of held files.
const heldLocalID = "livesync-go-cli-held"

// heldRecord is the record of held files, by document id.
type heldRecord struct {
	Docs map[string]*heldEntry `json:"docs"`
}

// heldEntry is what the CLI knows of one held file.
type heldEntry struct {
	Rev string `json:"rev"` // the revision last seen held
	// Since is when a pull first brought metadata of the file whose
	// chunks were not local (zero: not known, e.g. written before the
	// CLI kept this record).
	Since time.Time `json:"since,omitzero"`
	// Source is the remote the metadata came from.
	Source string `json:"source,omitempty"`
	// LastAttempt is when a hunt last looked for its chunks, and
	// LastResult what it found.
	LastAttempt time.Time `json:"last_attempt,omitzero"`
	LastResult  string    `json:"last_result,omitempty"`
}

// loadHeld reads the record (empty if there is none).
func loadHeld(ctx context.Context, st store.Store) (*heldRecord, error) {
	rec := &heldRecord{Docs: map[string]*heldEntry{}}
	raw, err := st.GetLocal(ctx, heldLocalID)
	if errors.Is(err, engine.ErrNotFound) {
		return rec, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, rec); err != nil {
		// A damaged record loses only dates; start a new one.
		return &heldRecord{Docs: map[string]*heldEntry{}}, nil
	}
	if rec.Docs == nil {
		rec.Docs = map[string]*heldEntry{}
	}
	return rec, nil
}

func (r *heldRecord) save(ctx context.Context, st store.Store) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return st.PutLocal(ctx, heldLocalID, b)
}

// heldTracker is the replicator's Holder during a pull: it notes the
// metadata revisions that arrive, and commit records which of them are
// held once the pull has written what it brought (a file's chunks may
// arrive after its metadata in the same pull).
type heldTracker struct {
	st     store.Store
	source string
	now    func() time.Time

	mu   sync.Mutex
	seen map[string]bool
}

func newHeldTracker(rep *replica, source string, now func() time.Time) *heldTracker {
	return &heldTracker{st: rep.st, source: source, now: now, seen: map[string]bool{}}
}

// Hold notes a pulled metadata revision (replicate.Holder).
func (h *heldTracker) Hold(_ context.Context, r hold.Revision, _ string) (hold.Outcome, error) {
	h.mu.Lock()
	h.seen[r.Doc] = true
	h.mu.Unlock()
	return hold.Held, nil
}

// commit records the noted files that are held (since now, unless they
// were held before) and forgets those that are not.
func (h *heldTracker) commit(ctx context.Context) error {
	h.mu.Lock()
	seen := h.seen
	h.seen = map[string]bool{}
	h.mu.Unlock()
	if len(seen) == 0 {
		return nil
	}
	rec, err := loadHeld(ctx, h.st)
	if err != nil {
		return err
	}
	now := h.now()
	for doc := range seen {
		m, missing, err := heldState(ctx, h.st, doc)
		if err != nil {
			return err
		}
		if len(missing) == 0 {
			delete(rec.Docs, doc)
			continue
		}
		e := rec.Docs[doc]
		if e == nil {
			e = &heldEntry{Since: now}
			rec.Docs[doc] = e
		}
		e.Rev, e.Source = m.Rev, h.source
	}
	return rec.save(ctx, h.st)
}

// heldState returns the winning metadata of doc and the chunks it lacks
// locally (none for a deleted or missing file).
func heldState(ctx context.Context, st store.Store, doc string) (livesync.Meta, []engine.ChunkID, error) {
	raw, err := st.Get(ctx, doc, store.GetOptions{})
	if errors.Is(err, engine.ErrNotFound) {
		return livesync.Meta{}, nil, nil
	}
	if err != nil {
		return livesync.Meta{}, nil, err
	}
	d, err := livesync.ParseDoc(raw)
	if err != nil || !d.IsFileDoc() {
		return livesync.Meta{}, nil, nil
	}
	m, err := livesync.ParseMeta(d)
	if err != nil || m.Deleted {
		return m, nil, nil
	}
	missing, err := missingChunks(ctx, st, m)
	return m, missing, err
}

// missingChunks returns the chunks of m that are not local, in order of
// first use.
func missingChunks(ctx context.Context, st engine.LocalChunks, m livesync.Meta) ([]engine.ChunkID, error) {
	ids := distinct(hold.FromMeta(m).Chunks)
	have, err := st.GetChunks(ctx, ids)
	if err != nil {
		return nil, err
	}
	var missing []engine.ChunkID
	for _, id := range ids {
		if _, ok := have[id]; !ok {
			missing = append(missing, id)
		}
	}
	return missing, nil
}

// heldFile is one held file of the replica.
type heldFile struct {
	meta    livesync.Meta
	chunks  int // distinct chunks it needs
	missing []engine.ChunkID
	entry   *heldEntry // nil: nothing recorded
}

// heldFiles lists the replica's held files, sorted by path.
func heldFiles(ctx context.Context, st store.Store, rec *heldRecord) ([]heldFile, error) {
	infos, err := st.AllDocs(ctx, store.AllDocsOptions{})
	if err != nil {
		return nil, err
	}
	var out []heldFile
	for _, in := range infos {
		if docid.IsChunkID(in.ID) || docid.IsSystemID(in.ID) {
			continue
		}
		m, missing, err := heldState(ctx, st, in.ID)
		if err != nil {
			return nil, err
		}
		if len(missing) == 0 {
			continue
		}
		out = append(out, heldFile{meta: m, chunks: len(distinct(hold.FromMeta(m).Chunks)), missing: missing, entry: rec.Docs[m.ID]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].meta.Path < out[j].meta.Path })
	return out, nil
}

func runHunt(env *cliEnv, args []string) error {
	c := env.newCommand("hunt", "hunt [--retry [REMOTE...]] [flags]")
	retry := c.fs.Bool("retry", false, "hunt the missing chunks now, on the named remotes (default: every remote of the configuration) that can fetch by id")
	perMinute := c.fs.Int("per-minute", hunt.DefaultMaxPerWindow, "with --retry: requests per minute to each remote at most (one request asks for up to 100 chunks of one file)")
	if err := c.parse(args); err != nil {
		return err
	}
	if *perMinute < 1 {
		return usageError{"--per-minute must be at least 1"}
	}
	if len(c.pos) > 0 && !*retry {
		return usageError{"hunt lists the held files of the local replica; name remotes only with --retry (hunt --retry REMOTE...)"}
	}
	rep, err := c.replica(false)
	if err != nil {
		return err
	}
	defer rep.Close()
	rec, err := loadHeld(env.ctx, rep.st)
	if err != nil {
		return err
	}
	files, err := heldFiles(env.ctx, rep.st, rec)
	if err != nil {
		return err
	}
	if !*retry {
		return printHeld(env, files)
	}
	return retryHunt(c, rep, rec, files, c.pos, hunt.Config{MaxPerWindow: *perMinute, Window: time.Minute})
}

// printHeld lists the held files.
func printHeld(env *cliEnv, files []heldFile) error {
	if env.json {
		rows := make([]map[string]any, 0, len(files))
		for _, f := range files {
			rows = append(rows, heldJSON(f, nil))
		}
		writeJSON(env.stdout, map[string]any{"ok": true, "command": "hunt", "held": rows})
		return nil
	}
	if len(files) == 0 {
		fmt.Fprintln(env.stdout, "nothing is held: every file's chunks are in the local replica")
		return nil
	}
	missing := 0
	for _, f := range files {
		missing += len(f.missing)
	}
	fmt.Fprintf(env.stdout, "%d %s held: the local replica has %s metadata but not %d of %s chunks, so %s cannot be read or exported yet\n\n",
		len(files), plural(len(files), "file is", "files are"), plural(len(files), "its", "their"),
		missing, plural(len(files), "its", "their"), plural(len(files), "it", "they"))
	tw := tabwriter.NewWriter(env.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PATH\tMISSING\tHELD SINCE\tFROM\tLAST HUNT")
	for _, f := range files {
		since, from, last := "unknown", "-", "never"
		if e := f.entry; e != nil {
			if !e.Since.IsZero() {
				since = e.Since.Local().Format("2006-01-02 15:04:05")
			}
			if e.Source != "" {
				from = e.Source
			}
			if !e.LastAttempt.IsZero() {
				last = e.LastAttempt.Local().Format("2006-01-02 15:04:05")
				if e.LastResult != "" {
					last += ": " + e.LastResult
				}
			}
		}
		fmt.Fprintf(tw, "%s\t%d of %d\t%s\t%s\t%s\n", safe(f.meta.Path), len(f.missing), f.chunks, since, safe(from), safe(last))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(env.stdout, "\nnext hunt: none scheduled (the CLI hunts only when asked); \"livesync hunt --retry\" fetches the missing chunks from every remote that can fetch by id")
	return nil
}

// heldJSON is the --json form of a held file (reasons: why it is still
// held after a hunt).
func heldJSON(f heldFile, reasons []string) map[string]any {
	row := map[string]any{"path": f.meta.Path, "id": f.meta.ID, "rev": f.meta.Rev, "chunks": f.chunks,
		"missing": len(f.missing), "since": nil, "source": nil, "last_attempt": nil, "last_result": nil, "next_attempt": nil}
	if e := f.entry; e != nil {
		row["since"] = timeJSON(e.Since)
		if e.Source != "" {
			row["source"] = e.Source
		}
		row["last_attempt"] = timeJSON(e.LastAttempt)
		if e.LastResult != "" {
			row["last_result"] = e.LastResult
		}
	}
	if reasons != nil {
		row["reasons"] = reasons
	}
	return row
}

// huntSource is one remote the hunt may ask.
type huntSource struct {
	remote string // the remote's ID (its URL)
	src    engine.ChunkSource
	err    error  // connecting failed
	note   string // why it is not asked, when it is not
}

// retryHunt connects the remotes, hunts the held files' chunks, and
// reports what was released and what is still missing and why.
func retryHunt(c *command, rep *replica, rec *heldRecord, files []heldFile, names []string, hc hunt.Config) error {
	env, ctx, cf, cfg := c.cliEnv, c.ctx, c.cf, c.cfg
	if len(files) == 0 {
		if env.json {
			writeJSON(env.stdout, map[string]any{"ok": true, "command": "hunt", "retry": true, "released": []any{}, "held": []any{}})
		} else {
			fmt.Fprintln(env.stdout, "nothing is held: every file's chunks are in the local replica")
		}
		return nil
	}
	if len(names) == 0 {
		for name := range cfg.Remotes {
			names = append(names, name)
		}
		sort.Strings(names)
		if len(names) == 0 {
			return usageError{"no remote to hunt on: name them (hunt --retry REMOTE...), or add remotes to the configuration file"}
		}
	}
	if _, err := c.localVault(rep); err != nil {
		return err
	}
	var sources []huntSource
	var active []engine.ChunkSource
	origin := map[string]string{} // remote ID -> throttle key
	var firstErr error
	for _, name := range names {
		spec, err := resolveRemote(cfg, name)
		if err != nil {
			return err
		}
		rem, err := c.connect(spec, rep, connectOptions{readOnly: true})
		if err != nil {
			var ue usageError
			if errors.As(err, &ue) || errors.Is(err, context.Canceled) {
				return err
			}
			if firstErr == nil {
				firstErr = err
			}
			sources = append(sources, huntSource{remote: spec.String(), err: err})
			continue
		}
		defer rem.Close()
		src := rem.Chunks()
		if src == nil || !src.CanFetchDirect() {
			note := "cannot fetch chunks by id"
			if spec.kind == "s3" {
				note += " (a journal bucket needs direct_fetch = true, or ?direct-fetch=1 in its URL)"
			}
			sources = append(sources, huntSource{remote: rem.ID(), note: note})
			continue
		}
		sources = append(sources, huntSource{remote: rem.ID(), src: src})
		active = append(active, src)
		origin[rem.ID()] = src.ThrottleKey()
	}
	for _, s := range sources {
		switch {
		case s.err != nil:
			_, msg := classify(s.err)
			fmt.Fprintf(env.stderr, "warning: not hunting on %s: %s\n", safe(s.remote), safe(msg))
		case s.note != "":
			fmt.Fprintf(env.stderr, "warning: not hunting on %s: it %s\n", safe(s.remote), safe(s.note))
		}
	}
	if len(active) == 0 && firstErr != nil {
		return firstErr
	}
	docs := make([]huntDoc, len(files))
	total := 0
	for i, f := range files {
		o := ""
		if f.entry != nil {
			o = origin[f.entry.Source]
		}
		docs[i] = huntDoc{id: f.meta.ID, missing: f.missing, origin: o}
		total += len(f.missing)
	}
	if !cf.quiet && len(active) > 0 {
		fmt.Fprintf(env.stderr, "hunting %d %s of %d %s on %d %s\n", total, plural(total, "chunk", "chunks"),
			len(files), plural(len(files), "file", "files"), len(active), plural(len(active), "remote", "remotes"))
	}
	found := 0
	onFound := func(n int) {
		found += n
		if !cf.quiet {
			fmt.Fprintf(env.stderr, "found %d/%d chunks\n", found, total)
		}
	}
	hc.Logger = env.logger(cf)
	res, err := huntChunks(ctx, rep.st, docs, active, onFound, hc)
	if err != nil {
		return err
	}

	// What is local now decides; a released file must also read.
	now := env.now()
	var released []heldFile
	type stillHeld struct {
		f       heldFile
		reasons []string
	}
	var held []stillHeld
	for _, f := range files {
		missing, err := missingChunks(ctx, rep.st, f.meta)
		if err != nil {
			return err
		}
		if len(missing) == 0 {
			if _, rerr := rep.v.ReadMeta(ctx, f.meta); rerr != nil {
				rerr = rep.fileErr("", rerr)
				f.missing = nil
				held = append(held, stillHeld{f, []string{"its chunks are all here but it does not read: " + rerr.Error()}})
				continue
			}
			released = append(released, f)
			delete(rec.Docs, f.meta.ID)
			continue
		}
		f.missing = missing
		reasons := res.reasons(missing, active)
		e := rec.Docs[f.meta.ID]
		if e == nil {
			e = &heldEntry{Rev: f.meta.Rev}
			rec.Docs[f.meta.ID] = e
		}
		e.LastAttempt, e.LastResult = now, strings.Join(reasons, "; ")
		f.entry = e
		held = append(held, stillHeld{f, reasons})
	}
	if err := rec.save(ctx, rep.st); err != nil {
		return err
	}

	if env.json {
		rel := make([]map[string]any, 0, len(released))
		for _, f := range released {
			rel = append(rel, map[string]any{"path": f.meta.Path, "id": f.meta.ID, "rev": f.meta.Rev, "chunks_fetched": len(f.missing)})
		}
		hs := make([]map[string]any, 0, len(held))
		for _, h := range held {
			hs = append(hs, heldJSON(h.f, h.reasons))
		}
		srcs := make([]map[string]any, 0, len(sources))
		for _, s := range sources {
			row := map[string]any{"remote": s.remote}
			switch {
			case s.err != nil:
				code, msg := classify(s.err)
				row["status"], row["error"], row["exit_code"] = "failed", msg, code
			case s.note != "":
				row["status"], row["error"] = "skipped", s.note
			default:
				st := res.stats.Sources[s.src.ThrottleKey()]
				row["status"] = "ok"
				row["requests"], row["chunks_found"], row["answered_missing"], row["failed_requests"] = st.Requests, st.Chunks, st.Missing, st.Failed
			}
			srcs = append(srcs, row)
		}
		writeJSON(env.stdout, map[string]any{"ok": len(held) == 0, "command": "hunt", "retry": true,
			"sources": srcs, "released": rel, "held": hs})
	} else {
		for _, f := range released {
			fmt.Fprintf(env.stdout, "released %s (%d %s fetched)\n", safe(f.meta.Path), len(f.missing), plural(len(f.missing), "chunk", "chunks"))
		}
		for _, h := range held {
			if len(h.f.missing) == 0 {
				fmt.Fprintf(env.stdout, "still held %s: %s\n", safe(h.f.meta.Path), safe(strings.Join(h.reasons, "; ")))
				continue
			}
			fmt.Fprintf(env.stdout, "still held %s: %d of %d chunks missing: %s\n", safe(h.f.meta.Path), len(h.f.missing), h.f.chunks, safe(strings.Join(h.reasons, "; ")))
		}
		fmt.Fprintf(env.stdout, "hunted %d %s: %d released, %d still held\n", len(files), plural(len(files), "file", "files"), len(released), len(held))
	}
	if len(held) > 0 {
		return partialError{msg: fmt.Sprintf("%d of %d files are still held (see above)", len(held), len(files))}
	}
	return nil
}

// huntDoc is one held file as the hunt sees it.
type huntDoc struct {
	id      string
	missing []engine.ChunkID
	origin  string // throttle key of the remote its metadata came from, "" if none
}

// huntResult is what one hunt learnt: each source's answer for each id
// it was asked about, and the hunt's counters.
type huntResult struct {
	answers map[string]map[engine.ChunkID]error // throttle key -> id -> nil (lacks it) or the failure
	stats   hunt.Stats
}

// reasons says why the ids are still missing, grouped: no source has
// them, or a source failed (with its error).
func (r huntResult) reasons(ids []engine.ChunkID, sources []engine.ChunkSource) []string {
	if len(sources) == 0 {
		return []string{"no remote that can fetch chunks by id was available"}
	}
	const noSource = "on no remote"
	counts := map[string]int{}
	var order []string
	for _, id := range ids {
		var why string
		for _, s := range sources {
			if err, ok := r.answers[s.ThrottleKey()][id]; ok && err != nil {
				_, msg := classify(err)
				why = fmt.Sprintf("%s failed: %s", s.ThrottleKey(), msg)
				break
			}
		}
		if why == "" {
			why = noSource
		}
		if counts[why] == 0 {
			order = append(order, why)
		}
		counts[why]++
	}
	out := make([]string, len(order))
	for i, why := range order {
		if why == noSource {
			out[i] = fmt.Sprintf("%d %s on no remote", counts[why], plural(counts[why], "chunk is", "chunks are"))
			continue
		}
		out[i] = fmt.Sprintf("%d %s: %s", counts[why], plural(counts[why], "chunk", "chunks"), why)
	}
	return out
}

// huntChunks hunts the missing chunks of docs on sources through
// engine/hunt (its per-source throttle, round robin, single flight) and
// returns once every missing id is local or has been asked of every
// source in the first pass (answered missing, or the request failed):
// the CLI makes one pass, the background retries of a relay are not its
// job. cfg is the hunt's configuration (its Logger also gets the hunt's
// logs). Found chunks are persisted in local. onFound, if set, is told how
// many chunks each delivery brought, on one goroutine at a time.
func huntChunks(ctx context.Context, local engine.LocalChunks, docs []huntDoc, sources []engine.ChunkSource, onFound func(n int), cfg hunt.Config) (huntResult, error) {
	res := huntResult{answers: map[string]map[engine.ChunkID]error{}}
	if len(sources) == 0 || len(docs) == 0 {
		return res, nil
	}
	var mu sync.Mutex
	delivered := map[engine.ChunkID]bool{}
	wake := make(chan struct{}, 1)
	poke := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	claims := fetch.NewCoordinator()
	defer claims.Close()
	// engine/hunt logs every pass that ends and every document it
	// completes, after the state change: the log wakes the wait below, so
	// the end of a pass is seen at once.
	cfg.Logger = slog.New(pokeHandler{next: cfg.Logger, poke: poke})
	h, err := hunt.New(cfg, hunt.Deps{Local: local, Claims: claims, OnDelivered: func(ids []engine.ChunkID) {
		mu.Lock()
		n := 0
		for _, id := range ids {
			if !delivered[id] {
				delivered[id] = true
				n++
			}
		}
		if n > 0 && onFound != nil {
			onFound(n)
		}
		mu.Unlock()
		poke()
	}})
	if err != nil {
		return res, err
	}
	defer h.Close()
	for _, s := range sources {
		res.answers[s.ThrottleKey()] = map[engine.ChunkID]error{}
		h.AddSource(&answerRecorder{ChunkSource: s, mu: &mu, answers: res.answers[s.ThrottleKey()], poke: poke}, nil)
	}
	for _, d := range docs {
		h.Enqueue(d.id, d.missing, d.origin, 0)
	}
	done := func() bool {
		st := h.Stats()
		if st.Docs == 0 {
			return true
		}
		if st.Hunting > 0 || st.InFlight > 0 {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		for _, d := range docs {
			for _, id := range d.missing {
				if delivered[id] {
					continue
				}
				for _, s := range sources {
					if _, ok := res.answers[s.ThrottleKey()][id]; !ok {
						return false
					}
				}
			}
		}
		return true
	}
	// Deliveries, answers and the hunt's logs wake the wait; a slow tick
	// is the safety net.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !done() {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-wake:
		case <-tick.C:
		}
	}
	res.stats = h.Stats()
	return res, nil
}

// pokeHandler is a slog.Handler that calls poke for every record of
// engine/hunt (at any level) and passes the records on to next (nil:
// discards).
type pokeHandler struct {
	next *slog.Logger
	poke func()
}

func (p pokeHandler) Enabled(context.Context, slog.Level) bool { return true }

func (p pokeHandler) Handle(ctx context.Context, r slog.Record) error {
	p.poke()
	if p.next != nil && p.next.Handler().Enabled(ctx, r.Level) {
		return p.next.Handler().Handle(ctx, r)
	}
	return nil
}

func (p pokeHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if p.next != nil {
		return pokeHandler{next: slog.New(p.next.Handler().WithAttrs(attrs)), poke: p.poke}
	}
	return p
}

func (p pokeHandler) WithGroup(name string) slog.Handler {
	if p.next != nil {
		return pokeHandler{next: slog.New(p.next.Handler().WithGroup(name)), poke: p.poke}
	}
	return p
}

// answerRecorder is a ChunkSource decorator that records each answer of
// its source: nil for an id it lacks or found, the error for the ids of
// a failed request.
type answerRecorder struct {
	engine.ChunkSource
	mu      *sync.Mutex
	answers map[engine.ChunkID]error
	poke    func()
}

func (a *answerRecorder) FetchChunks(ctx context.Context, ids []engine.ChunkID) (engine.FetchResult, error) {
	res, err := a.ChunkSource.FetchChunks(ctx, ids)
	if ctx.Err() != nil {
		return res, err
	}
	a.mu.Lock()
	for _, id := range ids {
		a.answers[id] = err
	}
	a.mu.Unlock()
	a.poke()
	return res, err
}
