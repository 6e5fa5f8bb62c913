package main

import (
	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/livesync-go/livesync-go/adapters/p2p"
)

// hostConfig is the libp2p host of a session: the identity beside the
// replica, the listen addresses (default loopback only).
func hostConfig(set p2pSettings, key crypto.PrivKey) p2p.Config {
	return p2p.Config{ListenAddrs: set.listen, Identity: key}
}
