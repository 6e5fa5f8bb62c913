// Package storetest is the conformance suite of store.Store. Every
// implementation runs it from its own tests:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, opts store.Options) store.Store {
//			… a new, empty store configured with opts …
//		})
//	}
//
// A Store whose semantics differ on purpose (one kept in CouchDB keeps
// every revision's body until compaction, whatever Options.KeepBodies
// says) runs RunProfile with a Profile naming each difference; Run is
// RunProfile with the zero Profile, store.Open's semantics.
//
// Run calls open once per subtest and closes the store it gets (Close must
// be idempotent). The suite covers new_edits=false and true, conflicts and
// their resolution, the winning-revision rule, deleted leaves and
// tombstones, _revisions and stemming, RevsDiff, BulkGet, the changes feed
// (order, paging and resumption, style=all_docs leaves, Mango selectors,
// longpoll), _local documents, chunks, big batches, closing and
// cancellation, and revision history: earlier revisions' bodies kept as
// Options.KeepBodies says, _revs_info, Compact and the revs limit; and
// hostile input: PutBatch, the id and revision size limits, _revisions
// far longer than the revs limit. RunAtomic, for a Store built with
// store.Open over a Backend, fails the backend's writes at every key of a
// batch and checks that nothing of it is left. Bench holds the shared
// benchmarks.
package storetest
