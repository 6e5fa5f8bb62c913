package negotiate

import "time"

// Admission is one node's connection to a remote, as Admit judges it.
type Admission struct {
	// Node is this node's id; Range the chunk-format range it announces
	// (CouchDBChunkRange or JournalChunkRange).
	Node  string
	Range ChunkRange
	// Device and Settings are what Register records for the node.
	Device   DeviceInfo
	Settings TweakValues
	Check    CheckOptions
	// AllowJoin adds a node that a locked remote does not accept to
	// accepted_nodes (upstream's markRemoteResolved).
	AllowJoin bool
	// ReadOnly judges without asking for a write.
	ReadOnly bool
	Now      time.Time
}

// Admit is upstream's ensureRemoteIsCompatible on the milestone m
// as read (a NewMilestone when the remote has none): it registers the
// node in m, judges it with Check, joins a locked remote with AllowJoin,
// and reports whether m must be written back. Unlike upstream, which
// writes the registration before judging, a refused node (any verdict
// whose Err is not nil) and a ReadOnly admission ask for no write, so
// that refused and read-only connections leave no trace in the
// milestone. m is changed even when no write is asked for.
func Admit(m *Milestone, a Admission) (write bool, v Verdict) {
	write = m.Register(a.Node, a.Range, a.Device, a.Settings, a.Now)
	v = Check(m, a.Node, a.Range, a.Settings, a.Check)
	if (v.Kind == VerdictNodeLocked || v.Kind == VerdictNodeCleaned) && a.AllowJoin {
		m.Accept(a.Node, a.Range)
		write = true
		v = Check(m, a.Node, a.Range, a.Settings, a.Check)
	}
	return write && !a.ReadOnly && v.Err() == nil, v
}
