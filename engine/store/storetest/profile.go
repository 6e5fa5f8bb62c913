package storetest

import (
	"slices"
	"testing"

	"github.com/livesync-go/livesync-go/engine/store"
)

// Profile says where a Store's semantics differ, on purpose, from those
// of the Stores store.Open builds, so that the suite checks what the
// Store promises instead of failing on what it cannot do. The zero value
// is store.Open's semantics (Run). A case that does not apply to a
// profile is not run for it; each field says which.
type Profile struct {
	// KeepsAllBodies: the store keeps the body of every revision until
	// Compact, whatever Options.KeepBodies says, as CouchDB keeps them
	// until the database is compacted. Cases that expect a non-leaf body
	// dropped at write time expect it kept, and HistoryKeepNewestN
	// (KeepBodies N) is not run.
	KeepsAllBodies bool
	// DefaultRevsLimit is the revs limit of a store opened with
	// Options.RevsLimit 0; 0 means store.DefaultRevsLimit. CouchDB's
	// default _revs_limit is 1000. Stemming cases use it.
	DefaultRevsLimit int
	// FixedRevsLimit: the revs limit cannot be read or changed
	// (RevsLimit and SetRevsLimit may answer engine.ErrUnsupported, and
	// Options.RevsLimit is not applied), so RevsLimitDefaultAndSet and
	// RevsLimitOption are not run. PouchDB's express-pouchdb (the
	// CouchDB-protocol test server) has no _revs_limit endpoint; Apache
	// CouchDB has one.
	FixedRevsLimit bool
	// LenientSince: a since that is none of the store's sequences is read
	// as the start of an empty page instead of an error. express-pouchdb
	// does so; Apache CouchDB answers 400.
	LenientSince bool
	// RandomRevs: revisions of local edits (Put, PutBatch) are not a
	// function of the edit, so the same body written twice gets two
	// different revisions. PouchDB makes random ones; Apache CouchDB and
	// store.Open hash the edit.
	RandomRevs bool
	// RevsDiffByBody: RevsDiff reports as missing a revision that is in
	// the tree but has no body (an ancestor known only from _revisions,
	// or compacted). PouchDB does; Apache CouchDB and store.Open answer
	// by the tree, and the suite checks that for them.
	RevsDiffByBody bool
	// SelectorIDOrder: with a selector, Changes lists the matching
	// documents in id order instead of sequence order (express-pouchdb
	// filters through pouchdb-find); the suite then checks the set of
	// documents, not their order. Apache CouchDB keeps sequence order.
	SelectorIDOrder bool
	// RevsInfoNoDeleted: _revs_info gives "available" instead of
	// "deleted" for a deletion that is not a leaf (PouchDB); Apache
	// CouchDB and store.Open say "deleted".
	RevsInfoNoDeleted bool
	// ManyLeaves is the number of conflicting leaves GetRevs reads from
	// one document (0 means 2000). PouchDB merges each new leaf into the
	// tree at a cost that grows with the leaves already there, so the
	// test server takes minutes for 2000; Apache CouchDB does not.
	ManyLeaves int
}

// bodiless drops from missing, when p.RevsDiffByBody, the revisions
// listed in tree: those the case knows are in the tree without a body.
func (p Profile) bodiless(missing []string, tree ...string) []string {
	if !p.RevsDiffByBody || missing == nil {
		return missing
	}
	out := []string{}
	for _, r := range missing {
		if !slices.Contains(tree, r) {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func (p Profile) revsLimit() int {
	if p.DefaultRevsLimit == 0 {
		return store.DefaultRevsLimit
	}
	return p.DefaultRevsLimit
}

// RunProfile runs the conformance suite against the stores open returns,
// with the semantics p describes (see Run).
func RunProfile(t *testing.T, open func(t *testing.T, opts store.Options) store.Store, p Profile) {
	run(t, open, p)
}
