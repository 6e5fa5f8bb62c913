// Package activity counts remote work so that readers of chunks know
// whether anything can still deliver one.
//
// Two counts are kept, mirroring upstream LiveSync's ReplicatorService
// (commonlib src/services/base/ReplicatorService.ts,
// runBoundedRemoteActivity and runFiniteReplicationActivity):
//
//   - the bounded count: every operation that talks to a remote and ends
//     (one-shot replication, an on-demand chunk fetch, a rebuild, a
//     push-only P2P request). Hosts use it for wake locks, lifecycle
//     deferral and a "remote work" indicator.
//   - the finite count: the narrower set of operations that can deliver
//     documents into the local store and have a completion boundary (a
//     one-shot pull or sync, the pull-only catch-up before a live channel,
//     a P2P pull). A finite operation is also bounded.
//
// The continuous live channel is in neither count: it never completes, so
// waiting for it would make a chunk read unbounded.
//
// The counts are entered only through the typed boundaries RunBounded and
// RunFinite. A boundary ends when its function returns, whether it
// succeeded, failed or panicked: a failed replication has proved nothing,
// but it has stopped being a producer. Overlapping finite operations keep
// the finite count above zero until the last one settles.
//
// Subscribers are called after every transition of the finite count
// between zero and non-zero (quiescence and its end). They read State for
// the current counts; State.FiniteStarts lets a caller tell whether a
// finite operation started since an earlier observation, which is how
// chunk retrieval decides that a local recheck or a remote probe is
// "current".
package activity
