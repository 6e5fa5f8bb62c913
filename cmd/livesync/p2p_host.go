package main

import (
	"fmt"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/livesync-go/livesync-go/adapters/p2p"
	"github.com/livesync-go/livesync-go/engine/negotiate"
)

// hostConfig is the libp2p host of a session: the identity beside the
// replica, the listen addresses (default loopback only), and the circuit
// relays to reserve a slot on. Hole punching is always on: it needs both
// sides, the dialling one included.
func hostConfig(set p2pSettings, key crypto.PrivKey) p2p.Config {
	return p2p.Config{ListenAddrs: set.listen, Identity: key, StaticRelays: set.relayPeers, HolePunching: true}
}

// joinServed registers this replica on the group's records it serves
// (p2p.RegisterServed), so a peer's first sync adopts this vault's
// settings and salt.
func (r *p2pRun) joinServed(rep *replica, served *p2p.Served, dev negotiate.DeviceInfo) error {
	err := p2p.RegisterServed(r.ctx, rep.v, served, dev, r.now)
	if err != nil {
		return &remoteError{remote: fmt.Sprintf("the records of group %s in the local replica", r.set.group), err: err}
	}
	return nil
}
