// Package vault is the engine's client of one LiveSync vault: a local
// replica (a store.Store) kept in sync with remotes, with files read,
// written, deleted and listed by vault path.
//
// # Use
//
//	v, err := vault.Open(ctx, st, vault.Options{})          // the replica's vault
//	link, err := v.Attach(ctx, remote, vault.AttachOptions{}) // the handshake
//	res, err := v.Pull(ctx, link, vault.SyncOptions{})        // or Push, Sync; Live until ctx ends
//	data, err := v.Read(ctx, "notes/today.md")                // missing chunks fetched and kept
//	stop := v.Watch(ctx, func(e vault.Event) { ... })         // file and status events
//	defer v.Close()
//
// The replica keeps the vault's must-match settings (never the
// passphrase) and what it knows of each remote in the _local document
// RecordID, this device's node id where the plugin keeps it, and the
// record of held files in HeldRecordID: the command-line client's
// records, so its replicas open unchanged.
//
// Remotes attach through the Remote port (CouchDB databases, journal
// buckets, peers; engine/vault/vaulttest has in-memory ones). Attach runs
// the handshake of engine/negotiate: read-only first, with the passphrase
// proven against the remote's own data, then the writing handshake that
// registers this device (or joins a locked remote, when Admit allows).
// Syncs run engine/replicate for a replication endpoint and
// engine/journalsync for a journal.
//
// Reads go through one engine/fetch layer per Vault, with upstream's
// waiting rules: chunks missing locally are fetched from the attached
// remotes that can fetch by id (one request per chunk however many
// readers wait) and kept. Pulled metadata whose chunks are missing is
// held (FileHeld) and never served half-arrived; a later pull, a Read or
// Hunt (engine/hunt, across every remote, one pass or with backoff)
// releases it (FileReleased).
//
// What the vault does is reported as typed events (Watch) and snapshots
// (Status, Held), never through logs. Close cancels what runs and leaves
// no goroutine, claim or timer behind.
//
// The package is transport-neutral and builds for GOOS=js: the wasm build
// and the command-line client are its two users. A program built with
// the tags nocouchdb and nos3 (no remote adapter: the wasm core module)
// links no handshake, replication, journal sync or hunt: Attach and
// Replicate fail, and the vault is a local one.
package vault
