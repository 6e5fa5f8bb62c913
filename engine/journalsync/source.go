package journalsync

import (
	"container/list"
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/journal"
)

// Stats counts the chunk source's work since New, for metrics and for
// the requests-per-chunk figure of a benchmark.
type Stats struct {
	// Lists counts List requests of on-demand indexing.
	Lists int64
	// PacksDownloaded counts Get requests for packs.
	PacksDownloaded int64
	// CacheHits counts pack lookups answered from the decoded-pack cache.
	CacheHits int64
	// ChunksFound and ChunksMissing count ids answered Found and Missing.
	ChunksFound, ChunksMissing int64
}

// Requests is the number of requests the chunk source made.
func (s Stats) Requests() int64 { return s.Lists + s.PacksDownloaded }

// ChunkSource returns the journal's chunk source: fetch by id through
// the index of which pack holds which chunk. CanFetchDirect reports
// Config.DirectFetch; ThrottleKey is Remote.ID(). It is safe for
// concurrent use, also while Receive or Send runs.
func (j *Journal) ChunkSource() engine.ChunkSource { return j.src }

// Stats returns the chunk source's counters.
func (j *Journal) Stats() Stats {
	s := j.src
	return Stats{
		Lists: s.lists.Load(), PacksDownloaded: s.downloads.Load(), CacheHits: s.hits.Load(),
		ChunksFound: s.found.Load(), ChunksMissing: s.missing.Load(),
	}
}

// errUnreadable marks a pack whose chunks cannot be served (gone, or it
// does not open): its ids are answered Missing, never as an error.
var errUnreadable = errors.New("journalsync: pack cannot be read")

// source is the journal's engine.ChunkSource.
type source struct {
	j     *Journal
	cache *packCache

	mu         sync.Mutex
	flights    map[string]*flight // pack downloads in progress, by name
	listing    *flight            // the on-demand listing in progress
	listGen    uint64             // on-demand listings completed
	unreadable map[string]bool    // packs that are gone or do not open (until ClearQuarantine or a reset)

	lists, downloads, hits, found, missing atomic.Int64
}

// flight is one download (or listing) shared by every caller that needs
// it; done is closed when its results are set.
type flight struct {
	done   chan struct{}
	chunks map[string]string            // a download: the pack's chunks
	packs  map[string]map[string]string // a listing: the packs it downloaded
	err    error
}

func newSource(j *Journal) *source {
	return &source{j: j, cache: newPackCache(j.cfg.PackCacheBytes), flights: map[string]*flight{}, unreadable: map[string]bool{}}
}

func (s *source) CanFetchDirect() bool { return s.j.cfg.DirectFetch }

func (s *source) ThrottleKey() string { return s.j.cfg.Remote.ID() }

// reset forgets cached packs and unreadable marks (the bucket was wiped
// or the checkpoint reset).
func (s *source) reset() {
	s.cache.clear()
	s.forgetUnreadable()
}

func (s *source) forgetUnreadable() {
	s.mu.Lock()
	s.unreadable = map[string]bool{}
	s.mu.Unlock()
}

// FetchChunks answers ids from the packs that hold them: ids are grouped
// by pack, each needed pack is read once (from the cache, or downloaded
// whole: packs are compressed and maybe encrypted as a whole, so one
// chunk cannot be read alone). Ids the index does not know make it list
// the bucket after the newest pack it indexed from a listing and index
// the new packs (without applying them); ids still unknown are Missing,
// as are the ids of packs that are gone or do not open. Errors are
// transport and authentication failures of the bucket (and of the local
// store holding the index), or ctx's.
func (s *source) FetchChunks(ctx context.Context, ids []engine.ChunkID) (engine.FetchResult, error) {
	var res engine.FetchResult
	if len(ids) == 0 {
		return res, nil
	}
	if _, err := s.j.state(ctx); err != nil {
		return res, err
	}
	s.mu.Lock()
	gen := s.listGen
	s.mu.Unlock()
	groups, unknown := s.lookup(ids)
	var fresh map[string]map[string]string // packs the listing downloaded
	if len(unknown) > 0 {
		var err error
		if fresh, err = s.indexNew(ctx, gen); err != nil {
			return engine.FetchResult{}, err
		}
		more, still := s.lookup(unknown)
		for p, g := range more {
			groups[p] = append(groups[p], g...)
		}
		res.Missing = append(res.Missing, still...)
	}
	for _, name := range slices.SortedFunc(maps.Keys(groups), journal.ComparePackKeys) {
		chunks, ok := fresh[name]
		if !ok {
			var err error
			chunks, err = s.pack(ctx, name)
			if err != nil && !errors.Is(err, errUnreadable) {
				return engine.FetchResult{}, err
			}
		}
		for _, id := range groups[name] {
			if data, ok := chunks[id]; ok {
				res.Found = append(res.Found, engine.Chunk{ID: id, Data: data})
			} else {
				res.Missing = append(res.Missing, id)
			}
		}
	}
	s.found.Add(int64(len(res.Found)))
	s.missing.Add(int64(len(res.Missing)))
	return res, nil
}

// lookup groups ids by the pack the index names for them.
func (s *source) lookup(ids []engine.ChunkID) (map[string][]engine.ChunkID, []engine.ChunkID) {
	groups := make(map[string][]engine.ChunkID)
	var unknown []engine.ChunkID
	s.j.mu.Lock()
	x := &s.j.st.index
	for _, id := range ids {
		if n, ok := x.chunks[id]; ok {
			name := x.packs[n]
			groups[name] = append(groups[name], id)
		} else {
			unknown = append(unknown, id)
		}
	}
	s.j.mu.Unlock()
	return groups, unknown
}

// indexNew lists the bucket after the newest pack indexed from a listing
// (received, or indexed on demand; packs this device sent are indexed
// when sent but do not move this cursor) and indexes every pack it did
// not know. Concurrent callers share one listing, and a caller that
// looked its ids up before a listing completed (gen is the count it saw)
// takes that listing's result instead of listing again. It returns the
// chunks of the packs the listing downloaded (read-only), so that a
// caller does not download them again when the cache cannot hold them.
func (s *source) indexNew(ctx context.Context, gen uint64) (map[string]map[string]string, error) {
	var last *flight
	for {
		s.mu.Lock()
		if s.listGen != gen {
			s.mu.Unlock()
			if last != nil {
				return last.packs, nil
			}
			return nil, nil
		}
		f := s.listing
		if f == nil {
			f = &flight{done: make(chan struct{})}
			s.listing = f
			s.mu.Unlock()
			f.packs, f.err = s.listAndIndex(ctx)
			s.mu.Lock()
			s.listing = nil
			if f.err == nil {
				s.listGen++
			}
			s.mu.Unlock()
			close(f.done)
			return f.packs, f.err
		}
		s.mu.Unlock()
		select {
		case <-f.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if f.err != nil && !isCanceled(f.err) {
			return nil, f.err
		}
		last = f
		// Done (listGen moved), or the leader's context ended: loop.
	}
}

func (s *source) listAndIndex(ctx context.Context) (map[string]map[string]string, error) {
	j := s.j
	j.mu.Lock()
	cursor := ""
	for _, name := range j.st.index.packs {
		if !j.st.sentFiles.has(name) && (cursor == "" || journal.ComparePackKeys(name, cursor) > 0) {
			cursor = name
		}
	}
	j.mu.Unlock()
	after := ""
	if cursor != "" {
		after = j.key(cursor)
	}
	s.lists.Add(1)
	keys, err := j.cfg.Remote.List(ctx, after)
	if err != nil {
		return nil, err
	}
	packs := make(map[string]map[string]string)
	for _, k := range keys {
		name, ok := strings.CutPrefix(k, j.prefix)
		if !ok || !journal.IsPackListingCandidate(name) {
			continue
		}
		j.mu.Lock()
		known := j.st.index.has(name)
		j.mu.Unlock()
		s.mu.Lock()
		bad := s.unreadable[name]
		s.mu.Unlock()
		if known || bad {
			continue
		}
		chunks, err := s.pack(ctx, name)
		if err != nil {
			if errors.Is(err, errUnreadable) {
				continue
			}
			return nil, err
		}
		packs[name] = chunks
	}
	if len(packs) > 0 {
		j.cfg.Log.Debug("journalsync: packs indexed on demand", "source", j.cfg.Remote.ID(), "packs", len(packs))
		if err := j.save(ctx); err != nil {
			return nil, err
		}
	}
	return packs, nil
}

// pack returns the chunks of one pack (id → data), from the cache or by
// downloading it; a downloaded pack is indexed and cached. Concurrent
// callers share one download. A pack that is gone or does not open
// returns an error wrapping errUnreadable.
func (s *source) pack(ctx context.Context, name string) (map[string]string, error) {
	for {
		// The cache is read under s.mu: a download puts its pack in the
		// cache before it leaves s.flights, so a caller that finds
		// neither is the one to download it (read before taking s.mu,
		// a download ending in between was started again).
		s.mu.Lock()
		if chunks, ok := s.cache.get(name); ok {
			s.mu.Unlock()
			s.hits.Add(1)
			return chunks, nil
		}
		if s.unreadable[name] {
			s.mu.Unlock()
			return nil, errUnreadable
		}
		f := s.flights[name]
		if f == nil {
			f = &flight{done: make(chan struct{})}
			s.flights[name] = f
			s.mu.Unlock()
			f.chunks, f.err = s.download(ctx, name)
			s.mu.Lock()
			delete(s.flights, name)
			if errors.Is(f.err, errUnreadable) {
				s.unreadable[name] = true
			}
			s.mu.Unlock()
			close(f.done)
			return f.chunks, f.err
		}
		s.mu.Unlock()
		select {
		case <-f.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if f.err == nil || !isCanceled(f.err) {
			return f.chunks, f.err
		}
	}
}

func (s *source) download(ctx context.Context, name string) (map[string]string, error) {
	j := s.j
	key := j.key(name)
	s.downloads.Add(1)
	body, err := j.cfg.Remote.Get(ctx, key)
	if err != nil {
		if isMissingObject(err) {
			j.cfg.Log.Warn("journalsync: indexed pack is gone; its chunks are answered missing", "pack", key)
			return nil, errUnreadable
		}
		return nil, err
	}
	chunks := make(map[string]string)
	var ids []string
	size := int64(0)
	err = journal.OpenFunc(key, body, j.cfg.Cipher, j.cfg.InflateLimit, func(r journal.Record) error {
		if r.IsChunk() {
			if _, dup := chunks[r.ID]; !dup {
				ids = append(ids, r.ID)
				size += int64(len(r.ID) + len(r.ChunkData) + chunkOverhead)
			}
			chunks[r.ID] = r.ChunkData
		}
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		j.cfg.Log.Warn("journalsync: pack does not open; its chunks are answered missing", "pack", key, "stage", string(stageOf(err)), "err", err)
		return nil, errUnreadable
	}
	j.mu.Lock()
	j.st.addIndex(name, ids)
	j.mu.Unlock()
	s.cache.put(name, chunks, size)
	return chunks, nil
}

func isCanceled(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// chunkOverhead approximates the memory of one cached chunk beyond its
// id and data (map entry, string headers).
const chunkOverhead = 64

// packCache is an LRU of decoded packs bounded by the sum of their
// sizes. A pack larger than the bound is not cached.
type packCache struct {
	mu    sync.Mutex
	limit int64
	size  int64
	order *list.List // of *cacheEntry, most recent first
	byKey map[string]*list.Element
}

type cacheEntry struct {
	name   string
	chunks map[string]string
	size   int64
}

func newPackCache(limit int64) *packCache {
	return &packCache{limit: limit, order: list.New(), byKey: map[string]*list.Element{}}
}

func (c *packCache) get(name string) (map[string]string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[name]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*cacheEntry).chunks, true
}

func (c *packCache) put(name string, chunks map[string]string, size int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if size > c.limit {
		return
	}
	if e, ok := c.byKey[name]; ok {
		c.size -= e.Value.(*cacheEntry).size
		c.order.Remove(e)
	}
	c.byKey[name] = c.order.PushFront(&cacheEntry{name, chunks, size})
	c.size += size
	for c.size > c.limit {
		e := c.order.Back()
		ce := e.Value.(*cacheEntry)
		c.order.Remove(e)
		delete(c.byKey, ce.name)
		c.size -= ce.size
	}
}

func (c *packCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.order.Init()
	c.byKey = map[string]*list.Element{}
	c.size = 0
}
