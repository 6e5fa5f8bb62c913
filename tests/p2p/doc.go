// Package p2ptest holds the library-level integration tests of the
// peer-to-peer adapter (adapters/p2p): real libp2p hosts on loopback, a
// real Nostr relay for discovery, real stores and vaults, wired as the
// command-line client and the relay wire them.
//
// The tests prove, each failing when the behaviour breaks: three peers
// and an always-on peer discover each other and converge with no echo;
// a peer that disconnects mid-batch resumes from checkpoints with
// nothing lost or duplicated; an unapproved peer gets nothing; the hunt
// completes a held note from two peers that each hold half of its chunks,
// within the hunt's per-source limits; a wrong vault passphrase is a
// clear error, and the discovery room tag reveals neither the group nor
// its passphrase.
package p2ptest
