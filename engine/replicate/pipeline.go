package replicate

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/livesync-go/livesync-go/engine"
)

// groupDocs bounds the documents of consecutive pages written to the
// target in one BulkDocs: for a pull one store transaction, for a push
// one request (two with the chunks first). Only pages already fetched
// are grouped, and not after a failed write has shrunk the batch sizes
// (the group could be what was too large), so it adds no memory beyond
// batches_limit pages; it saves a transaction (and its fsync) or a
// request (and the server's commit), and a checkpoint write, per page
// whenever the writer falls behind the fetches.
const groupDocs = 1000

// pushGroupBytes also bounds a push's group, by the documents' bytes:
// servers limit a request's size (the relay to 4 MiB by default), and a
// document's remote form (encrypted) is larger than its local one. A
// page larger than this alone is still sent alone, as before.
const pushGroupBytes = 1 << 20

// changesPages is the number of pages of changes one Changes request
// lists (at most batches_limit).
const changesPages = 4

// fetched is one page of changes and the revisions its fetch read from
// the source; done is closed when docs and err are set.
type fetched struct {
	page engine.ChangesPage
	docs []json.RawMessage
	err  error
	done chan struct{}
}

// pipeline reads pages of changes ahead and fetches each page's missing
// revisions concurrently; next hands the fetched pages back in feed
// order. A token is held from a page's read until release is called
// after its write, so at most limit pages are read and not yet written.
type pipeline struct {
	lg     *leg
	sz     sizes
	follow bool
	group  bool // write consecutive fetched pages together
	// maxBytes, if not 0, bounds a group's bytes.
	maxBytes int

	tokens chan struct{}
	pages  chan *fetched
	held   *fetched // received by next, to be returned by its next call
	wg     sync.WaitGroup
}

func newPipeline(lg *leg, sz sizes, follow bool) *pipeline {
	maxBytes := 0
	if lg.dir == Push {
		maxBytes = pushGroupBytes
	}
	return &pipeline{lg: lg, sz: sz, follow: follow, group: !sz.fallback, maxBytes: maxBytes,
		tokens: make(chan struct{}, sz.limit), pages: make(chan *fetched, sz.limit)}
}

// read lists the source's changes from since, starting a fetch for each
// page, until the end of the feed (unless following), an error or the end
// of ctx. The caller has done wg.Add(1).
//
// One request lists up to changesPages pages (split by their changes'
// sequences), since each request must wait for the one before it: over a
// slow link that chain, not the fetches, would set the pace. Every page
// still holds its own token.
func (pl *pipeline) read(ctx context.Context, since string) {
	defer pl.wg.Done()
	defer close(pl.pages)
	want := min(changesPages, pl.sz.limit)
	for {
		for range want {
			select {
			case pl.tokens <- struct{}{}:
			case <-ctx.Done():
				return
			}
		}
		page, err := pl.lg.src.Changes(ctx, engine.ChangesRequest{Since: since, Limit: pl.sz.batch * want, Selector: pl.lg.selector, Wait: pl.follow})
		if err != nil {
			f := &fetched{page: page, err: err, done: make(chan struct{})}
			close(f.done)
			pl.release(want - 1)
			pl.pages <- f // never blocks: every page holds a token
			return
		}
		subs := split(page, pl.sz.batch, want)
		pl.release(want - len(subs))
		for _, sub := range subs {
			f := &fetched{page: sub, done: make(chan struct{})}
			pl.wg.Add(1)
			go func() {
				defer pl.wg.Done()
				defer close(f.done)
				f.docs, f.err = fetch(ctx, pl.lg, sub.Results)
			}()
			pl.pages <- f
		}
		if !pl.follow && (len(page.Results) == 0 || page.Pending == 0) {
			return
		}
		if page.LastSeq != "" {
			since = page.LastSeq
		}
	}
}

// split cuts a page of changes into pages of at most batch changes, each
// ending at its last change's sequence (the last one at the page's), at
// most max pages; a page it cannot cut (a change without a sequence)
// stays whole.
func split(page engine.ChangesPage, batch, max int) []engine.ChangesPage {
	n := len(page.Results)
	if n <= batch || (n+batch-1)/batch > max {
		return []engine.ChangesPage{page}
	}
	for _, c := range page.Results {
		if c.Seq == "" {
			return []engine.ChangesPage{page}
		}
	}
	var subs []engine.ChangesPage
	for i := 0; i < n; i += batch {
		end := min(i+batch, n)
		sub := engine.ChangesPage{Results: page.Results[i:end:end], LastSeq: page.Results[end-1].Seq, Pending: -1}
		if page.Pending >= 0 {
			sub.Pending = page.Pending + n - end
		}
		if end == n {
			sub.LastSeq = page.LastSeq
		}
		subs = append(subs, sub)
	}
	return subs
}

// next waits for the next page in feed order to be fetched and returns
// it, followed by the pages after it that are fetched already (when
// grouping, up to groupDocs documents, and for a push pushGroupBytes).
// It returns nil at the end of the feed and the page's error if its read
// or fetch failed; the pages before a failed one have been returned and
// can be written and checkpointed.
func (pl *pipeline) next(ctx context.Context) ([]*fetched, error) {
	f := pl.held
	pl.held = nil
	if f == nil {
		var ok bool
		if f, ok = <-pl.pages; !ok {
			return nil, nil
		}
	}
	select {
	case <-f.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if f.err != nil {
		return nil, f.err
	}
	group := []*fetched{f}
	n, size := len(f.docs), docBytes(f.docs)
	for pl.group && n < groupDocs {
		var g *fetched
		select {
		case g = <-pl.pages:
		default:
		}
		if g == nil {
			break
		}
		if !isDone(g) || g.err != nil || n+len(g.docs) > groupDocs ||
			(pl.maxBytes > 0 && size+docBytes(g.docs) > pl.maxBytes) {
			pl.held = g
			break
		}
		group = append(group, g)
		n += len(g.docs)
		size += docBytes(g.docs)
	}
	return group, nil
}

// docBytes is the size of docs' JSON.
func docBytes(docs []json.RawMessage) int {
	n := 0
	for _, d := range docs {
		n += len(d)
	}
	return n
}

func isDone(f *fetched) bool {
	select {
	case <-f.done:
		return true
	default:
		return false
	}
}

// release returns the tokens of n written pages.
func (pl *pipeline) release(n int) {
	for range n {
		<-pl.tokens
	}
}
