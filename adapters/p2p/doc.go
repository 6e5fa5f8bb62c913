// Package p2p is the peer-to-peer adapter: replicas that talk to each
// other directly over libp2p (TCP and QUIC transports, Noise security,
// yamux multiplexing), without a CouchDB server or a bucket in between.
//
// This first step gives a replica a persistent ed25519 identity
// (LoadOrCreateIdentity), a host (NewHost), an allow-list of approved
// peers by peer id (AllowList) and the chunks protocol (ChunksProtocol):
// ServeChunks answers approved peers' requests for chunks by id from a
// local store, and ChunkClient is an engine.ChunkSource that asks one peer,
// so a peer can take part in the chunk hunt beside the other remotes. A
// peer that is not on the allow-list gets an explicit refusal and nothing
// is served.
//
// The replicate protocol (ReplicateProtocol) lets peers replicate as a
// client replicates with CouchDB: Serve answers approved peers from a
// Served database (documents and chunks in the remote, encrypted form, and
// the handshake's records, which StoreRecords keeps in a store), and
// Remote is a peer as a vault.Remote. Each request is one stream with one
// request frame and one answer; a peer beyond its stream cap is answered
// "busy", an unapproved one "refused".
//
// A sync group ties it together. The PeerBook is the persistent
// allow-list (approved peers, and the bounded list of pending ones that
// announced themselves or were refused), a JSON file that several
// processes share. JoinGroup serves a Served database to the approved
// peers, announces this peer in the group's discovery room (package
// discovery) and reports peers as they are found, lost, approved or
// revoked; a revocation closes the peer's connections. ServedVault is
// what a replica serves (its plaintext replica encoded with the group's
// salt), and SyncVault syncs a vault with the group's approved peers,
// once or live.
//
// Messages are JSON in length-prefixed frames (a 4-byte big-endian length,
// then the payload) whose size is bounded by MaxFrameSize; every stream
// has a deadline. Protocol ids carry a version so that incompatible
// changes get a new id instead of a silent misreading.
//
// The package is native only: it is never imported by the engine or the
// wasm build, and its code is excluded from GOOS=js builds.
package p2p
