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
	mu    sync.RWMutex
	peers map[peer.ID]string
}

// NewAllowList returns an empty allow-list: every peer is refused.
func NewAllowList() *AllowList {
	return &AllowList{peers: make(map[peer.ID]string)}
}

// Allow approves id under the device name (replacing an earlier name).
func (a *AllowList) Allow(id peer.ID, device string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.peers[id] = device
}

// Revoke withdraws the approval of id; streams it opens afterwards are
// refused.
func (a *AllowList) Revoke(id peer.ID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.peers, id)
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
