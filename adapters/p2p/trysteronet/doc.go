// Package trysteronet is a native Trystero 0.25.3 peer: it joins a room
// the way Self-hosted LiveSync's P2P mode does (trystero's Nostr
// strategy), so Go peers and the plug-in's peers meet in one room.
//
// Signalling runs over Nostr relays with this package's own websocket
// client (gorilla/websocket; go-nostr supplies the event type and the
// Schnorr signature, with a fresh key per Room). A Room subscribes to its
// root and self topics, announces itself on the root topic on Trystero's
// schedule (233, 533, 1333 ms, then every 5333 ms), and pairs with every
// peer it hears: the peer whose id sorts first sends a sealed offer, the
// other answers, both trickle sealed ICE candidates. A sealed message that
// does not open under the room password is reported as a join error that
// matches trystero.ErrIncorrectPassword ("incorrect room password").
//
// Connections are WebRTC (pion/webrtc v4) with one data channel labelled
// "data", created by the offering side with the browser defaults (ordered,
// reliable, not negotiated), as trystero's peer.mjs does. The ICE servers
// default to trystero's STUN list; TURN servers and a relay-only policy
// come from the Config. Frames on the channel are Trystero's room frames
// (engine/trystero): the room's presence, then the room-password
// handshake on @_hsdata/@_hsready, after which the peer is active and
// action messages flow both ways. Leaving sends @_leave.
//
// A Room is the transport of an rpcroom.Room: AttachRPC feeds it the
// "rpc2" action and the peer arrivals and departures.
//
// Built for GOOS=js, the same Room runs over its host's WebRTC and
// websockets: the RTCPeerConnection and WebSocket constructors of
// Config.Host (the global ones by default) stand in for pion and
// gorilla/websocket, and internal/bip340 signs the Nostr events in place
// of go-nostr's secp256k1. The browser gathers the ICE candidates
// (LoopbackOnly means nothing there), and incoming events are checked
// for their id but not their signature (see parseEvent in nostr_js.go).
package trysteronet
