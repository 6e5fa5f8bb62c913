// Package vault is the engine's client of one LiveSync vault: a local
// replica (a store.Store) kept in sync with remotes, with files read,
// written, deleted and listed by vault path.
//
// Remotes attach through the Remote port (CouchDB databases, journal
// buckets, peers). Reads go through the fetch layer with the seed's
// waiting rules; pulled metadata whose chunks are missing is held by the
// purgatory and hunted across every remote, never shown half-arrived.
// What the vault does is reported as typed events (Watch), never through
// logs.
//
// The package is transport-neutral and builds for GOOS=js: the wasm build
// and the CLI are its two users.
package vault
