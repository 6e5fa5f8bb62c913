//go:build !js && !wasip1

// Package boltstore keeps a store.Store in a bbolt file (go.etcd.io/bbolt):
// the native local replica. It is not built for js/wasm (bbolt needs a
// file system and mmap); wasm builds use store.NewMemory.
//
//	st, err := boltstore.Open("/path/vault.db", boltstore.Options{})
//	...
//	defer st.Close()
//
// Each BulkDocs, PutBatch, Put, PutChunks and PutLocal call is atomic and
// committed with fsync before the call returns: an acknowledged batch
// survives a crash or kill, and an interrupted or failed one leaves no
// trace (bbolt's copy-on-write pages and meta page switch). Calls that
// write at the same time share a group commit: a call that finds no
// commit in progress commits at once, and those arriving during a commit
// are committed together in the next bbolt transaction, with one pair of
// syncs, instead of one after another. A call that fails in a group
// leaves the others' writes to be committed without it. A write that fails because the file system is full (ENOSPC)
// or a quota is exhausted (EDQUOT) returns an error wrapping
// store.ErrStorageFull. Every key the store writes fits bbolt's 32 KiB
// key limit (see store.MaxKeySize). A
// file is opened by one process at a time; a second Open waits up to
// Options.Timeout for the lock.
//
// Each file records its store format version (the meta bucket's
// "format" key, FormatVersion for a new file; a file without one is
// format 1 and gets it recorded). Opening a file of an older format
// first keeps a consistent copy of it, <file>.bak-v<N>-<UTC time>, then
// runs the registered migrations in order, each in one transaction that
// also records its version, so an interrupted upgrade leaves a whole
// file of an older format, which the next open migrates again. A file
// of a newer format than the build knows is refused, unchanged, with a
// *FormatError (ErrNewerFormat): downgrading is not supported.
//
// Snapshot writes a consistent copy of an open store's file (a bbolt
// read transaction's WriteTo) while writes go on; SnapshotFile copies a
// file no process has open.
package boltstore
