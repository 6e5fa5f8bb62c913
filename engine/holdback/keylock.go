package holdback

import (
	"slices"
	"sync"
)

// keyLocks is one mutex per document id, created on demand and freed
// when unused. Writers lock every metadata id of their batch, in sorted
// order, so two batches never deadlock and the decision "is this
// document held?" and the write that follows are one step for a document.
type keyLocks struct {
	mu sync.Mutex
	m  map[string]*keyLock
}

type keyLock struct {
	mu   sync.Mutex
	refs int
}

// lock locks the distinct keys of keys and returns the function that
// unlocks them.
func (k *keyLocks) lock(keys []string) (unlock func()) {
	keys = slices.Clone(keys)
	slices.Sort(keys)
	keys = slices.Compact(keys)
	held := make([]*keyLock, len(keys))
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*keyLock{}
	}
	for i, key := range keys {
		l := k.m[key]
		if l == nil {
			l = &keyLock{}
			k.m[key] = l
		}
		l.refs++
		held[i] = l
	}
	k.mu.Unlock()
	for _, l := range held {
		l.mu.Lock()
	}
	return func() {
		for _, l := range held {
			l.mu.Unlock()
		}
		k.mu.Lock()
		for i, key := range keys {
			if held[i].refs--; held[i].refs == 0 {
				delete(k.m, key)
			}
		}
		k.mu.Unlock()
	}
}
