//go:build !js

// Package livesyncp2p is a native LiveSync P2P node: a Trystero room
// joined with pion/webrtc and Nostr signalling (adapters/p2p/trysteronet)
// carrying LiveSync's replicator (engine/livesyncrpc), so a Go program
// meets the plugin's peers in their own room and replicates with them as
// one of them.
//
// # Use
//
//	n, err := livesyncp2p.Open(ctx, livesyncp2p.Config{
//		Room: trysteronet.Config{RoomID: group,
//			Password: trystero.RoomPassword(p2pPassphrase),
//			Relays:   []string{"wss://relay.example/_nostr"}},
//		Peer: livesyncrpc.Config{DB: plain, DBName: livesyncrpc.DBName(vault),
//			DeviceName: "server", Tweaks: tweaks, Passphrase: vaultPassphrase,
//			AutoAccept: "~^laptop", Decisions: decisions},
//	})
//	defer n.Close()
//	res, err := n.Sync(ctx, "laptop", livesyncrpc.PullOptions{}) // pull, then legacy/reqSync
//
// Peer.SelfID is filled in from the room. Documents cross in the plugin's
// plaintext local form (the data channel's DTLS is the only protection):
// Peer.DB must be the vault's plaintext replica, so a node serving an
// end-to-end encrypted vault needs the vault passphrase to decode it
// (decorate.CodecView over a remote-form store).
//
// A node is headless unless Peer.Ask is set: peers that no stored
// decision, auto-accept pattern or session decision accepts are refused,
// and their requests are dropped without an answer. FileDecisions keeps
// the plugin's "p2p-device-decisions" (accept or deny by device name) in
// a JSON file.
//
// ChunkSource makes a peer present in the room a chunk source of the
// engine's hunt: chunks by id with db.bulkGet, as the peer's local
// database holds them.
package livesyncp2p
