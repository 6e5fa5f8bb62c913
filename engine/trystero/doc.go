// Package trystero is the peer-to-peer room protocol of Trystero 0.25.3
// (npm trystero, @trystero-p2p/core and @trystero-p2p/nostr), which
// Self-hosted LiveSync's P2P mode speaks, ported to Go byte for byte and
// without any transport: no WebRTC, no WebSocket, no clock. Transports
// and the RPC layer on top (rpc2 wire messages, the LiveSync methods)
// live elsewhere and use this package for every rule of the wire.
//
// The protocol has four layers; each has its part here.
//
// # Room identity
//
// A LiveSync P2P room is Trystero's (appId, roomId, password): appId is
// the P2P_AppID setting or DefaultAppID, roomId the group id verbatim,
// and the password RoomPassword(passphrase). From these follow the
// signalling topics (RootTopic, SelfTopic, both SHA1B36 hashes), the
// Nostr event kind of a topic (TopicKind), the key that seals session
// descriptions (SDPKey) and the room token that tags data-channel frames
// (RoomToken). Peers have random ids of SelfIDLen characters (NewSelfID);
// the peer whose id sorts first leads (IsLeader).
//
// # Signalling
//
// Every peer announces {"peerId"} on the root topic right after
// subscribing and then after NextAnnounce(n) (233, 533, 1333 ms, then
// every 5333 ms). On an announcement the leader sends an offer
// {"peerId","offerId","offer"} to the other's self topic; the other peer
// answers on the leader's self topic and both trickle candidates; a
// non-leader that hears an announcement nudges the leader with a bare
// {"peerId"} on the leader's self topic. Signal and DecodeSignal are
// those messages; offers, answers and candidates are sealed with SealSDP
// and opened with OpenSDP, whose failure is ErrIncorrectPassword (the
// plug-in's "incorrect room password"). Offers and answers seal the bare
// SDP text, candidates the JSON of ICECandidate.
//
// Trystero's Nostr strategy carries these messages as ephemeral events
// of kind TopicKind(topic) tagged ["x", topic]: NostrEventID,
// NostrEventMessage and NostrSubscribe build its relay messages; signing
// (BIP-340 Schnorr with a per-process key) is the transport's. Once the
// data channel is open, further session descriptions travel unsealed on
// the action ActionSignal.
//
// # Frames
//
// One data channel (label "data") carries frames for any number of
// rooms: a room frame (RoomFrame) wraps one action frame with the room
// token; a presence frame (PresenceFrame) says a room was joined or left
// on this connection. ParseFrame reads both.
//
// An action frame is a 36-byte header (ActionHeader: the NUL-padded
// name, a per-action nonce, flags last/metadata/binary/JSON, a progress
// byte) and a body of at most ChunkBytes (16348) bytes. SplitAction and
// Sender cut a message into frames as Trystero's sender does;
// Reassembler joins them per (peer, action, nonce) as its receiver does,
// within bounds a hostile peer cannot exceed.
//
// # Handshake
//
// Before a connected peer is active, only ActionLeave,
// ActionHandshakeData and ActionHandshakeReady are accepted from it
// (ReceiveWhilePending). With a password, the leader sends a challenge
// (HandshakeChallenge) and the other side answers with HandshakeResponse;
// then each side sends ActionHandshakeReady. PeerHandshake runs that
// exchange for one peer.
//
// # Text
//
// Trystero encodes strings with TextEncoder and decodes with
// TextDecoder. This package does the same: Go strings are read as
// JavaScript strings (an invalid UTF-8 byte is U+FFFD), and decoded text
// drops a leading byte order mark and replaces each maximal invalid
// UTF-8 sequence with one U+FFFD.
//
// # Bounds
//
// Trystero trusts its peers; this package does not. ParseFrame rejects
// frames over MaxFrameBytes, OpenSDP sealed strings over MaxSealedBytes,
// and a Reassembler bounds each peer's messages in flight, their bytes
// and the size of one message (ReassemblerConfig). Trystero's own
// messages stay far inside every bound.
package trystero
