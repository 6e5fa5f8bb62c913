package main

import (
	"fmt"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/livesync-go/livesync-go/adapters/p2p"
	"github.com/livesync-go/livesync-go/engine/negotiate"
)

// hostConfig is the libp2p host of a session: the identity beside the
// replica, the listen addresses (default loopback only), and the circuit
// relays to reserve a slot on, with hole punching through them.
func hostConfig(set p2pSettings, key crypto.PrivKey) p2p.Config {
	return p2p.Config{ListenAddrs: set.listen, Identity: key, StaticRelays: set.relayPeers, HolePunching: len(set.relayPeers) > 0}
}

// joinServed runs the handshake of this replica on the group's records
// it serves, as the group vault's first device: it creates the salt, the
// version document and a milestone whose preferred settings are the
// vault's, and registers this device. A peer's first sync then adopts
// this vault's settings and salt instead of starting a vault of its own
// with the defaults; a later run finds them and changes nothing.
func (r *p2pRun) joinServed(rep *replica, served *p2p.Served, dev negotiate.DeviceInfo) error {
	tv, err := rep.v.TweakValues()
	if err != nil {
		return err
	}
	node, err := rep.v.NodeID(r.ctx)
	if err != nil {
		return err
	}
	_, err = negotiate.Handshake(r.ctx, served.Records, negotiate.HandshakeOptions{NodeID: node, Range: negotiate.CouchDBChunkRange,
		Device: dev, Settings: tv, CreateIfMissing: true, Now: r.now})
	if err != nil {
		return &remoteError{remote: fmt.Sprintf("the records of group %s in the local replica", r.set.group), err: err}
	}
	return nil
}
