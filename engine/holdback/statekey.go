package holdback

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
)

// saveState writes the purgatory state unless its content is what the
// inner store holds already: a session that changed nothing (a read, a
// write of complete notes) writes nothing, which in a process per
// request saves a write per request and the contention between them.
func (s *Store) saveState(ctx context.Context) {
	if s.follower.Load() {
		return
	}
	snap, err := s.p.Snapshot()
	if err != nil {
		s.saveFailed("purgatory state", err)
		return
	}
	key := contentKey(snap)
	if key != nil && bytes.Equal(key, s.savedKey) {
		return
	}
	if err := s.inner.PutLocal(ctx, localState, snap); err != nil {
		s.saveFailed("purgatory state", err)
		return
	}
	s.savedKey = key
}

// contentKey is a purgatory snapshot without its timers (saved_at and
// the *_ns fields, times relative to saved_at), nil if it cannot be
// read. Two snapshots with one key differ only in time: what happens
// with time alone (a deadline passing, a memory expiring) a restore of
// the older one replays, since timers continue from it with the
// downtime subtracted; a change by an event (a hold, a release, chunks
// arriving, a failed release, a state change) changes the key.
func contentKey(snap []byte) []byte {
	var v any
	if err := json.Unmarshal(snap, &v); err != nil {
		return nil
	}
	b, err := json.Marshal(stripTimers(v))
	if err != nil {
		return nil
	}
	return b
}

func stripTimers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if k == "saved_at" || strings.HasSuffix(k, "_ns") {
				delete(x, k)
				continue
			}
			x[k] = stripTimers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = stripTimers(e)
		}
	}
	return v
}
