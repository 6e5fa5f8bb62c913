// Package idb keeps a replica's store in the host's IndexedDB
// (globalThis.indexedDB, in a browser, a WebView or Node with a polyfill),
// as a store.Backend for store.Open, for GOOS=js GOARCH=wasm.
//
// The store's transactions are synchronous and IndexedDB is not: a
// transaction's goroutine blocks on each IndexedDB request it makes. Open
// reads no record, so opening a replica costs the same whatever its
// size. Get reads through a cache of committed values (and absences),
// filled by reads, by the first page of a scan and by completed writes,
// which forgets about half its entries past a size limit; Ascend reads
// the bucket in key order with getAll over a key range, in pages growing
// from 64 to 4096 records. Prefetch (store.Prefetcher) reads the keys a
// transaction is about to Get in one IndexedDB transaction.
// Update records the keys fn writes, showing them to fn's own reads
// (Ascend merges them with what IndexedDB holds), and when fn returns nil
// writes that set in one IndexedDB readwrite transaction (durability
// "strict" where the host supports it) and returns only after the
// transaction's complete event; only then does the cache take the
// writes. If the transaction fails or aborts, Update returns the error
// and nothing changed, so a page killed at any moment reopens to the
// state of its last completed Update. Update holds the backend
// exclusively until then, so what IndexedDB holds is the committed state
// whenever a View runs. A request that fails (or a record not framed as
// below) fails its transaction: Get returns nil and View or Update the
// error.
//
// On disk: database NAME (version 1 or more), one object store "kv" whose
// keys are binary (ArrayBuffer): one bucket byte followed by the store's
// key. Each value is a Uint8Array framing its own key:
// uvarint(len(key)) ‖ key ‖ uvarint(len(value)) ‖ value, so that Ascend
// reads whole records in pages (getAll, values only) and each write
// transaction's records are copied to the host in one buffer.
//
// Only one handle may have a database open at a time: two tabs writing
// the same replica would corrupt it (and make each cache stale). Open
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
