package store

// Bucket names one keyspace of a Backend.
type Bucket uint8

// The buckets a Backend must provide.
const (
	BucketDocs  Bucket = iota // document id → revision tree record
	BucketSeqs                // 8-byte big-endian sequence → document id
	BucketLocal               // _local id (without the prefix) → document
	BucketMeta                // store counters and settings
	// BucketBodies holds the bodies of earlier (non-leaf) revisions kept
	// for history: key uvarint(len(id)) ‖ id ‖ rev → body.
	BucketBodies
	NumBuckets = 5
)

// Backend is an ordered, transactional key-value store on which Open
// builds a Store (the memory store and engine/store/boltstore are two).
// A Store over a different kind of storage, such as a CouchDB cluster,
// implements Store directly instead.
type Backend interface {
	// View runs fn in a read-only transaction that sees one consistent
	// state. Several may run at once.
	View(fn func(Tx) error) error
	// Update runs fn in the single read-write transaction. If fn returns
	// nil the writes are committed (durably, for a persistent backend)
	// before Update returns; otherwise none of them are. A backend whose
	// commit can lose to a writer elsewhere (one over D1, whose isolates
	// share a database) may discard the writes and run fn again, so fn
	// must set anything it reports outside the transaction afresh on
	// each run.
	Update(fn func(Tx) error) error
	// Close waits for transactions in flight and releases the backend.
	Close() error
}

// Prefetcher is a Backend for which each read of a key it has not cached
// costs a round trip (IndexedDB's). The Store calls Prefetch with the
// keys of bucket b a transaction is about to Get, when it knows them
// ahead, so that the backend reads them together first. It is a hint: a
// failure is ignored and the Gets read the keys.
type Prefetcher interface {
	Prefetch(b Bucket, keys [][]byte) error
}

// Tx is a transaction of a Backend. Byte slices passed to fn or returned
// by Get are valid only until the transaction ends and must not be
// modified; keys and values given to Put must not be modified afterwards.
type Tx interface {
	// Get returns the value of key, or nil if absent.
	Get(b Bucket, key []byte) []byte
	Put(b Bucket, key, value []byte) error
	Delete(b Bucket, key []byte) error
	// Ascend calls fn for each key ≥ from in ascending byte order until fn
	// returns false.
	Ascend(b Bucket, from []byte, fn func(key, value []byte) bool) error
}
