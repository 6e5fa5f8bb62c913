package hunt

import (
	"time"

	"github.com/livesync-go/livesync-go/engine"
)

// memo remembers, per source (throttle key), the chunk ids the source
// answered it lacks, keyed by a fingerprint of the source's state (its
// update sequence or listing). A source's memo is cleared when its
// fingerprint changes, expires lazily MemoTTL after it was started, and
// at most MemoSources sources are remembered (the oldest is evicted). Sources without a fingerprint are never memoized:
// nothing would tell when they gained the chunk.
type memo struct {
	cap int
	ttl time.Duration
	m   map[string]*memoEntry
}

type memoEntry struct {
	fp      string
	created time.Time
	ids     map[engine.ChunkID]struct{}
}

func newMemo(cap int, ttl time.Duration) *memo {
	return &memo{cap: cap, ttl: ttl, m: make(map[string]*memoEntry)}
}

// current returns key's entry if it is valid for fingerprint fp at now;
// a stale one (other fingerprint, expired) is dropped.
func (m *memo) current(key, fp string, now time.Time) *memoEntry {
	me := m.m[key]
	if me == nil {
		return nil
	}
	if me.fp != fp || !now.Before(me.created.Add(m.ttl)) {
		delete(m.m, key)
		return nil
	}
	return me
}

// lacks reports whether key answered, in state fp, that it lacks id.
func (m *memo) lacks(key, fp string, id engine.ChunkID, now time.Time) bool {
	me := m.current(key, fp, now)
	if me == nil {
		return false
	}
	_, ok := me.ids[id]
	return ok
}

// add records that key, in state fp, lacks ids.
func (m *memo) add(key, fp string, ids []engine.ChunkID, now time.Time) {
	if len(ids) == 0 {
		return
	}
	me := m.current(key, fp, now)
	if me == nil {
		if len(m.m) >= m.cap {
			m.evictOldest()
		}
		me = &memoEntry{fp: fp, created: now, ids: make(map[engine.ChunkID]struct{})}
		m.m[key] = me
	}
	for _, id := range ids {
		me.ids[id] = struct{}{}
	}
}

func (m *memo) evictOldest() {
	var oldest string
	var at time.Time
	for k, me := range m.m {
		if oldest == "" || me.created.Before(at) || (me.created.Equal(at) && k < oldest) {
			oldest, at = k, me.created
		}
	}
	delete(m.m, oldest)
}

func (m *memo) forget(key string) { delete(m.m, key) }

func (m *memo) len() int { return len(m.m) }
