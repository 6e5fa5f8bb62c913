//go:build !js

package p2p

import (
	"sync"

	"github.com/libp2p/go-libp2p/core/peer"
)

// AllowList is the set of approved peers, by peer id, each with the device
// name the user approved it under. Only approved peers are served. It is
// safe for concurrent use; the zero value is not usable, use NewAllowList.
type AllowList struct {
	mu       sync.RWMutex
	peers    map[peer.ID]string
	watchers map[int]func(id peer.ID, approved bool)
	next     int
}

// NewAllowList returns an empty allow-list: every peer is refused.
func NewAllowList() *AllowList {
	return &AllowList{peers: make(map[peer.ID]string)}
}

// Allow approves id under the device name (replacing an earlier name).
// Watchers hear of it when id was not approved before.
func (a *AllowList) Allow(id peer.ID, device string) {
	a.mu.Lock()
	_, was := a.peers[id]
	a.peers[id] = device
	fns := a.watchersLocked()
	a.mu.Unlock()
	if !was {
		for _, fn := range fns {
			fn(id, true)
		}
	}
}

// Revoke withdraws the approval of id; streams it opens afterwards are
// refused. Watchers hear of it when id was approved (a Group closes the
// peer's connections, and with them its open streams).
func (a *AllowList) Revoke(id peer.ID) {
	a.mu.Lock()
	_, was := a.peers[id]
	delete(a.peers, id)
	fns := a.watchersLocked()
	a.mu.Unlock()
	if was {
		for _, fn := range fns {
			fn(id, false)
		}
	}
}

// Device returns the device name id was approved under, and whether it is
// approved. A nil AllowList approves no one.
func (a *AllowList) Device(id peer.ID) (string, bool) {
	if a == nil {
		return "", false
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	name, ok := a.peers[id]
	return name, ok
}

// Watch calls fn after each change of a peer's approval: approved true
// when id became approved, false when its approval was revoked. fn runs
// on the goroutine that made the change, after the list is updated and
// unlocked; it may read the list. The returned function removes fn.
func (a *AllowList) Watch(fn func(id peer.ID, approved bool)) (remove func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.watchers == nil {
		a.watchers = map[int]func(peer.ID, bool){}
	}
	n := a.next
	a.next++
	a.watchers[n] = fn
	return func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		delete(a.watchers, n)
	}
}

func (a *AllowList) watchersLocked() []func(peer.ID, bool) {
	if len(a.watchers) == 0 {
		return nil
	}
	fns := make([]func(peer.ID, bool), 0, len(a.watchers))
	for n := 0; n < a.next; n++ {
		if fn, ok := a.watchers[n]; ok {
			fns = append(fns, fn)
		}
	}
	return fns
}
