// Package idb keeps a replica's store in the host's IndexedDB
// (globalThis.indexedDB, in a browser, a WebView or Node with a polyfill),
// as a store.Backend for store.Open, for GOOS=js GOARCH=wasm.
//
// The store's transactions are synchronous and IndexedDB is not, so the
// backend serves reads from an in-memory copy of the whole replica
// (store.NewMemoryBackend), loaded at Open, and writes through: Update
// runs fn on the memory copy while recording the keys it writes, and when
// fn returns nil writes that set in one IndexedDB readwrite transaction
// (durability "strict" where the host supports it) and returns only after
// the transaction's complete event. If the transaction fails or aborts,
// Update returns the error and undoes the memory copy's changes, so the
// copy never shows what the disk lacks, and a page killed at any moment
// reopens to the state of its last completed Update.
//
// On disk: database NAME (version 1 or more), one object store "kv" whose
// keys are binary (ArrayBuffer): one bucket byte followed by the store's
// key. Each value is a Uint8Array framing its own key:
// uvarint(len(key)) ‖ key ‖ uvarint(len(value)) ‖ value, so that Open
// reads the replica in pages of whole records (getAll, values only) and
// each write transaction's records are copied to the host in one buffer.
//
// Only one handle may have a database open at a time: two tabs writing
// the same replica from separate memory copies would corrupt it. Open
// takes the Web Lock "livesync-go:idb:NAME" (navigator.locks, ifAvailable)
// and holds it until Close; where the host has no Web Locks it opens the
// database at the next version, which the browser holds back (blocked)
// while another connection is open. Either way a second Open fails with
// ErrBusy instead of waiting, and an open handle ignores versionchange
// requests, so a deletion or upgrade from elsewhere waits for Close.
//
// Update and View block their goroutine until IndexedDB answers, so they
// must never run inside a js.FuncOf callback (the host's event loop
// would never deliver the answer).
//
// Apart from its errors, the package builds only for js/wasm.
package idb
