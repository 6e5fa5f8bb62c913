package vault

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/hold"
	"github.com/livesync-go/livesync-go/engine/hunt"
)

// HuntOptions choose how Hunt hunts.
type HuntOptions struct {
	// Once makes one pass: every remote is asked once for every missing
	// chunk, then Hunt reports (a command line). Without it the hunt
	// goes on with engine/hunt's backoff until every held file is
	// released or ctx ends.
	Once bool
	// Remotes are the attached remotes to hunt on (nil: every one).
	Remotes []*Link
	// Config overrides Options.Hunt for this hunt (its Once is ignored).
	Config *hunt.Config
	// Explain words an error for the held record's last result (nil:
	// err.Error()).
	Explain func(error) string
}

// HuntResult is what a hunt did.
type HuntResult struct {
	// Released are the files whose chunks are all local now (Missing:
	// the chunks fetched).
	Released []HeldFile
	// Held are the files still held, with the reasons.
	Held []HeldFile
	// Sources are the remotes hunted on, or skipped.
	Sources []HuntSource
	// Stats is the hunt's final snapshot.
	Stats hunt.Stats
}

// HuntSource is one remote of a hunt.
type HuntSource struct {
	// Remote is the remote's ID, Key its chunk source's throttle key.
	Remote, Key string
	// CanFetch is false for a remote that cannot fetch chunks by id (not
	// asked).
	CanFetch bool
	// Stats are its requests (Stats.Sources[Key]).
	Stats hunt.SourceStats
}

// Reason says why chunks of a file are still missing after a hunt.
type Reason struct {
	// Chunks counts the chunks concerned.
	Chunks int
	// Source is the throttle key of the remote that failed (Err); empty
	// when no remote had them (or none could be asked: NoSource).
	Source string
	Err    error
	// NoSource: no remote that can fetch chunks by id was available.
	NoSource bool
	// Unreadable: every chunk is local, but the file does not read (Err).
	Unreadable bool
}

// Text words the reason; explain words an error (nil: err.Error()).
func (r Reason) Text(explain func(error) string) string {
	if explain == nil {
		explain = func(err error) string { return err.Error() }
	}
	switch {
	case r.NoSource:
		return "no remote that can fetch chunks by id was available"
	case r.Unreadable:
		return "its chunks are all here but it does not read: " + r.Err.Error()
	case r.Err != nil:
		return fmt.Sprintf("%d %s: %s failed: %s", r.Chunks, plural(r.Chunks, "chunk", "chunks"), r.Source, explain(r.Err))
	}
	return fmt.Sprintf("%d %s on no remote", r.Chunks, plural(r.Chunks, "chunk is", "chunks are"))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// answers records each source's answer for each id it was asked about:
// nil (found, or lacks it) or the request's failure.
type answers struct {
	mu sync.Mutex
	m  map[string]map[engine.ChunkID]error // throttle key -> id -> answer
}

func (a *answers) note(e hunt.Event) {
	if e.Kind != hunt.EventAnswered {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m[e.Source] == nil {
		a.m[e.Source] = map[engine.ChunkID]error{}
	}
	for _, id := range e.IDs {
		a.m[e.Source][id] = e.Err
	}
}

// reasons groups why ids are still missing: the first source (in order)
// that failed for an id, else no source had it.
func (a *answers) reasons(ids []engine.ChunkID, keys []string) []Reason {
	if len(keys) == 0 {
		return []Reason{{NoSource: true, Chunks: len(ids)}}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []Reason
	index := map[string]int{}
	for _, id := range ids {
		r := Reason{}
		for _, k := range keys {
			if err, ok := a.m[k][id]; ok && err != nil {
				r = Reason{Source: k, Err: err}
				break
			}
		}
		key := r.Source
		if i, ok := index[key]; ok {
			out[i].Chunks++
			continue
		}
		index[key] = len(out)
		r.Chunks = 1
		out = append(out, r)
	}
	return out
}

// Hunt fetches the missing chunks of the held files from the attached
// remotes that can fetch by id, through engine/hunt (per-remote
// throttles, the origin remote first, one flight per chunk shared with
// Read), keeps them, releases the files that are complete (FileReleased)
// and records for the others when they were hunted and why they are
// still held.
func (v *Vault) Hunt(ctx context.Context, o HuntOptions) (HuntResult, error) {
	ctx, end, err := v.begin(ctx)
	if err != nil {
		return HuntResult{}, err
	}
	defer end()
	files, err := v.Held(ctx)
	if err != nil || len(files) == 0 {
		return HuntResult{}, err
	}
	links := o.Remotes
	if links == nil {
		links = v.Links()
	}
	var res HuntResult
	var active []engine.ChunkSource
	origin := map[string]string{} // remote ID -> throttle key
	for _, l := range links {
		src := l.Chunks()
		if src == nil || !src.CanFetchDirect() {
			res.Sources = append(res.Sources, HuntSource{Remote: l.ID()})
			continue
		}
		res.Sources = append(res.Sources, HuntSource{Remote: l.ID(), Key: src.ThrottleKey(), CanFetch: true})
		active = append(active, src)
		origin[l.ID()] = src.ThrottleKey()
	}
	ans := &answers{m: map[string]map[engine.ChunkID]error{}}
	if res.Stats, err = v.runHunt(ctx, files, active, origin, ans, o); err != nil {
		return res, err
	}
	for i := range res.Sources {
		res.Sources[i].Stats = res.Stats.Sources[res.Sources[i].Key]
	}
	keys := make([]string, len(active))
	for i, s := range active {
		keys[i] = s.ThrottleKey()
	}
	res.Released, res.Held, err = v.concludeHunt(ctx, files, ans, keys, o.Explain)
	return res, err
}

// runHunt hunts the files' missing chunks on sources, reporting
// HuntFound events, until the hunt is done (o.Once: one pass) or ctx
// ends.
func (v *Vault) runHunt(ctx context.Context, files []HeldFile, sources []engine.ChunkSource, origin map[string]string, ans *answers, o HuntOptions) (hunt.Stats, error) {
	if len(sources) == 0 || !remotesLinked {
		return hunt.Stats{}, nil
	}
	cfg := v.opts.Hunt
	if o.Config != nil {
		cfg = *o.Config
	}
	cfg.Once = o.Once
	if cfg.Logger == nil {
		cfg.Logger = v.log
	}
	total := 0
	for _, f := range files {
		total += len(f.Missing)
	}
	var mu sync.Mutex
	delivered := map[engine.ChunkID]bool{}
	onDelivered := func(ids []engine.ChunkID) {
		mu.Lock()
		for _, id := range ids {
			delivered[id] = true
		}
		p := HuntProgress{Found: len(delivered), Total: total}
		mu.Unlock()
		v.emit(Event{Kind: HuntFound, Hunt: &p})
	}
	onEvent := func(e hunt.Event) {
		ans.note(e)
		if e.Kind == hunt.EventCompleted {
			// Released at once, not only when the hunt ends.
			if err := v.settleKnown(ctx, map[string]bool{e.Doc: false}); err != nil && ctx.Err() == nil {
				v.log.Warn("vault: recording a released file failed", "err", err)
			}
		}
	}
	h, err := hunt.New(cfg, hunt.Deps{Local: v.st, Claims: v.claims, OnDelivered: onDelivered, OnEvent: onEvent})
	if err != nil {
		return hunt.Stats{}, err
	}
	defer h.Close()
	for _, s := range sources {
		h.AddSource(s, nil)
	}
	for _, f := range files {
		h.Enqueue(f.Meta.ID, f.Missing, origin[f.Source], 0)
	}
	werr := h.Wait(ctx)
	return h.Stats(), werr
}

// concludeHunt decides from what is local now which files are released
// (they must also read) and which are still held and why, records it,
// and emits FileReleased and HeldCount.
func (v *Vault) concludeHunt(ctx context.Context, files []HeldFile, ans *answers, keys []string, explain func(error) string) (released, held []HeldFile, err error) {
	v.heldMu.Lock()
	defer v.heldMu.Unlock()
	rec, err := loadHeld(ctx, v.st)
	if err != nil {
		return nil, nil, err
	}
	now := v.opts.Now()
	var announce []HeldFile // released here, not by the hunt's completion events
	for _, f := range files {
		missing, err := missingChunks(ctx, v.st, f.Meta)
		if err != nil {
			return nil, nil, err
		}
		var reasons []Reason
		if len(missing) == 0 {
			_, rerr := v.readLocal(ctx, f)
			if rerr == nil {
				released = append(released, f)
				if rec.Docs[f.Meta.ID] != nil {
					delete(rec.Docs, f.Meta.ID)
					announce = append(announce, f)
				}
				continue
			}
			reasons = []Reason{{Unreadable: true, Err: rerr}}
		} else {
			reasons = ans.reasons(missing, keys)
		}
		f.Missing = missing
		f.LocalChunks = f.Chunks - len(missing)
		f.Reasons = reasons
		texts := make([]string, len(reasons))
		for i, r := range reasons {
			texts[i] = r.Text(explain)
		}
		e := rec.Docs[f.Meta.ID]
		if e == nil {
			e = &heldEntry{Rev: f.Meta.Rev}
			rec.Docs[f.Meta.ID] = e
		}
		e.LastAttempt, e.LastResult = now, strings.Join(texts, "; ")
		f.LastAttempt, f.LastResult = e.LastAttempt, e.LastResult
		held = append(held, f)
	}
	if err := rec.save(ctx, v.st); err != nil {
		return nil, nil, err
	}
	for _, f := range announce {
		v.emit(Event{Kind: FileReleased, Path: f.Meta.Path, DocID: f.Meta.ID, Rev: f.Meta.Rev, Remote: f.Source})
	}
	v.emit(Event{Kind: HeldCount, Held: len(held)})
	return released, held, nil
}

// readLocal reads a file from local chunks only.
func (v *Vault) readLocal(ctx context.Context, f HeldFile) ([]byte, error) {
	ids := Distinct(hold.FromMeta(f.Meta).Chunks)
	have, err := v.st.GetChunks(ctx, ids)
	if err != nil {
		return nil, err
	}
	return readWith(f.Meta, have)
}
