//go:build !(nocouchdb && nos3)

package vault

// remotesLinked: the program may attach remotes, so the vault links the
// handshake, replication, journal and hunt machinery.
const remotesLinked = true
