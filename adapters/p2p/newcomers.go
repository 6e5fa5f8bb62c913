//go:build !js

package p2p

import (
	"sync"
	"time"
)

// Bounds on strangers. Anyone who reaches the host can knock with a new
// peer id for every stream, and anyone who knows the group passphrase can
// announce any number of made-up peer ids: each new one would be a write
// of the peer book, an entry in a group's peer table and an event for
// its watchers. Past a burst of newcomerBurst, one new stranger per
// newcomerEvery is taken; the others are ignored (approved peers always
// pass, and a stranger ignored now is taken when it knocks or announces
// again later).
const (
	newcomerBurst = 60
	newcomerEvery = time.Second
)

// newcomers is a token bucket of newcomerBurst tokens, one more every
// newcomerEvery, on the clock its callers pass. The zero value is full.
type newcomers struct {
	mu     sync.Mutex
	used   float64 // tokens taken and not yet given back
	last   time.Time
	inited bool
}

// take takes a token at now; false when none is left.
func (n *newcomers) take(now time.Time) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.inited && now.After(n.last) {
		n.used = max(0, n.used-float64(now.Sub(n.last))/float64(newcomerEvery))
	}
	if !n.inited || now.After(n.last) {
		n.last, n.inited = now, true
	}
	if n.used+1 > newcomerBurst {
		return false
	}
	n.used++
	return true
}
