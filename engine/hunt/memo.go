package hunt

import (
	"maps"
	"slices"
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

// state returns the live memos at now, by source key, ids sorted.
func (m *memo) state(now time.Time) []MemoState {
	var out []MemoState
	for _, k := range slices.Sorted(maps.Keys(m.m)) {
		me := m.m[k]
		until := me.created.Add(m.ttl)
		if !now.Before(until) {
			continue
		}
		out = append(out, MemoState{Source: k, Fingerprint: me.fp, IDs: slices.Sorted(maps.Keys(me.ids)), Until: until.Round(0)})
	}
	return out
}

// restore adds the memos of an earlier process: expired ones and those
// without a source are ignored, an Until beyond now+ttl counts as
// now+ttl, a source listed twice keeps the memo that lasts longer (both
// merged, with the earlier expiry, if their fingerprints agree), and at most maxIDs ids in all are
// taken. It returns how many memos or ids it ignored.
func (m *memo) restore(ms []MemoState, now time.Time, maxIDs int) int {
	ignored, taken := 0, 0
	for _, me := range m.m {
		taken += len(me.ids)
	}
	for _, s := range ms {
		until := s.Until
		if limit := now.Add(m.ttl); until.After(limit) {
			until = limit
		}
		if s.Source == "" || !now.Before(until) {
			ignored++
			continue
		}
		created := until.Add(-m.ttl)
		cur := m.m[s.Source]
		switch {
		case cur != nil && cur.fp == s.Fingerprint:
			if created.Before(cur.created) {
				cur.created = created // the older start: the merged memo never outlives either
			}
		case cur != nil && !cur.created.Before(created):
			continue // the memo already here lasts longer
		default:
			if cur == nil && len(m.m) >= m.cap {
				m.evictOldest()
			}
			if cur != nil {
				taken -= len(cur.ids)
			}
			cur = &memoEntry{fp: s.Fingerprint, created: created, ids: make(map[engine.ChunkID]struct{})}
			m.m[s.Source] = cur
		}
		for i, id := range s.IDs {
			if taken >= maxIDs {
				ignored += len(s.IDs) - i
				break
			}
			if _, ok := cur.ids[id]; !ok && id != "" {
				cur.ids[id] = struct{}{}
				taken++
			}
		}
	}
	return ignored
}
