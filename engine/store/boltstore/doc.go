//go:build !js && !wasip1

// Package boltstore keeps a store.Store in a bbolt file (go.etcd.io/bbolt):
// the native local replica. It is not built for js/wasm (bbolt needs a
// file system and mmap); wasm builds use store.NewMemory.
//
//	st, err := boltstore.Open("/path/vault.db", boltstore.Options{})
//	...
//	defer st.Close()
//
// Each BulkDocs, PutBatch, Put, PutChunks and PutLocal call is one bbolt
// read-write transaction, committed with fsync before the call returns:
// an acknowledged batch survives a crash or kill, and an interrupted or
// failed one leaves no trace (bbolt's copy-on-write pages and meta page
// switch). A write that fails because the file system is full (ENOSPC)
// or a quota is exhausted (EDQUOT) returns an error wrapping
// store.ErrStorageFull. Every key the store writes fits bbolt's 32 KiB
// key limit (see store.MaxKeySize). A
// file is opened by one process at a time; a second Open waits up to
// Options.Timeout for the lock.
package boltstore
