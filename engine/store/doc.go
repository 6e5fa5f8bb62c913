// Package store is the engine's local replica: documents with CouchDB
// revision trees, a changes feed, _local documents and chunk lookup.
//
// Store is the port (see its doc comment for the full contract); it is an
// engine.Endpoint, so the replicator treats the local replica like any
// remote, and an engine.LocalChunks for chunk retrieval.
//
// Two implementations share one core: Open builds a Store over a Backend,
// an ordered transactional key-value store. NewMemory uses Go maps (for
// wasm and tests); engine/store/boltstore uses bbolt (native builds only).
// Both pass the conformance suite in engine/store/storetest, which any
// other Store (for example one kept in a CouchDB cluster) should run too.
//
// Usage:
//
//	st, err := store.NewMemory(store.Options{Name: "vault"})
//	...
//	defer st.Close()
//	rev, err := st.Put(ctx, json.RawMessage(`{"_id":"notes/a.md","type":"plain","children":[]}`))
//	page, err := st.Changes(ctx, engine.ChangesRequest{Since: "", Limit: 100})
//
// Layout of a Backend: BucketDocs maps an id to its record (sequence and
// flat revision tree, with the leaves' bodies); BucketBodies holds the
// bodies of earlier revisions kept for history (Options.KeepBodies) until
// Compact deletes them; BucketSeqs maps each document's latest sequence to
// its id, so a changes scan is one ordered walk; BucketLocal holds _local
// documents; BucketMeta the last sequence, the live-document count and the
// revs limit SetRevsLimit set. One write transaction per BulkDocs,
// PutBatch, Put, PutChunks or PutLocal call, so each is all-or-nothing;
// Compact takes one per batch of documents.
//
// Hostile input: the store is written by whoever may write to a served
// database, and its write transaction is the database's only one. Ids,
// _local ids and revisions have size limits (MaxIDLength,
// MaxLocalIDLength, MaxRevLength) checked before anything is written, a
// replicated revision's _revisions is read up to MaxRevisions ids, and
// every step on a revision tree is linear (FuzzRevTreeMerge checks it
// against a naive model). Reading many revisions of one document
// (GetRevs) loads its tree once. A full disk is ErrStorageFull.
package store
