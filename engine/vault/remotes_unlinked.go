//go:build nocouchdb && nos3

package vault

// remotesLinked is false in a program built with the tags nocouchdb and
// nos3, which has no remote adapter (the wasm core module): Attach and
// Replicate fail with errNoRemotes and Hunt has no source to ask, so the
// handshake, replication, journal sync and hunt code is not linked.
// (Quarantined still reads a journal's checkpoint in the replica.)
const remotesLinked = false
