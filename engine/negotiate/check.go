package negotiate

import (
	"fmt"
	"strconv"

	"github.com/livesync-go/livesync-go/engine"
)

// VerdictKind is the outcome of Check: upstream's ENSURE_DB_RESULT.
type VerdictKind int

const (
	// VerdictOK: sync may proceed.
	VerdictOK VerdictKind = iota
	// VerdictLocked: the remote is locked but this node is accepted; sync
	// may proceed and the caller should show that the remote is locked.
	VerdictLocked
	// VerdictNodeLocked: the remote was rebuilt and this node is not
	// accepted; sync is refused until the node fetches the rebuilt remote
	// (then Accept) or the remote is unlocked.
	VerdictNodeLocked
	// VerdictNodeCleaned: like VerdictNodeLocked after a clean-up. Upstream
	// lets a caller that asked to ignore the clean lock proceed as locked.
	VerdictNodeCleaned
	// VerdictIncompatible: the chunk-format ranges of the accepted nodes do
	// not intersect; sync is refused.
	VerdictIncompatible
	// VerdictMismatched: must-match tweak values differ from the remote's
	// preferred set; sync is refused until one side is adopted.
	VerdictMismatched
)

func (k VerdictKind) String() string {
	switch k {
	case VerdictOK:
		return "OK"
	case VerdictLocked:
		return "LOCKED"
	case VerdictNodeLocked:
		return "NODE_LOCKED"
	case VerdictNodeCleaned:
		return "NODE_CLEANED"
	case VerdictIncompatible:
		return "INCOMPATIBLE"
	case VerdictMismatched:
		return "MISMATCHED"
	}
	return "VerdictKind(" + strconv.Itoa(int(k)) + ")"
}

// Verdict is the result of Check. For VerdictMismatched, Diffs is the
// non-empty list of differences and Preferred the remote's preferred set
// as stored (this node's own set when the remote has none, as upstream);
// both are empty otherwise.
type Verdict struct {
	Kind      VerdictKind
	Diffs     []TweakDiff
	Preferred TweakValues
}

// Err returns nil exactly when sync may proceed (VerdictOK, VerdictLocked),
// and otherwise an error for errors.Is: ErrNodeLocked or ErrNodeCleaned
// (both wrap ErrLocked), ErrIncompatible (also engine.ErrUnsupported), or
// a *TweakMismatchError wrapping ErrTweakMismatch.
func (v Verdict) Err() error {
	switch v.Kind {
	case VerdictOK, VerdictLocked:
		return nil
	case VerdictNodeLocked:
		return ErrNodeLocked
	case VerdictNodeCleaned:
		return ErrNodeCleaned
	case VerdictIncompatible:
		return fmt.Errorf("negotiate: chunk format ranges of the accepted nodes do not intersect: %w (%w)",
			ErrIncompatible, engine.ErrUnsupported)
	case VerdictMismatched:
		return &TweakMismatchError{Diffs: v.Diffs, Preferred: v.Preferred}
	}
	return fmt.Errorf("negotiate: unknown verdict %v: %w", v.Kind, ErrIncompatible)
}

// CheckOptions are the settings that relax Check. The zero value is
// upstream's default: every check on.
type CheckOptions struct {
	// IgnoreVersionCheck skips the chunk-range check (ignoreVersionCheck).
	IgnoreVersionCheck bool
	// DisableCheckingConfigMismatch skips the tweak comparison
	// (disableCheckingConfigMismatch).
	DisableCheckingConfigMismatch bool
}

// Check is steps 4–6 of ensureRemoteIsCompatible (commonlib
// src/pouchdb/LiveSyncDBFunctions.ts), in upstream's order; call Register
// first and write the milestone back if it says so (Check's answer does
// not depend on it). m is nil when the remote has no milestone; Check does
// not modify m. me is this node's id, my its chunk range (CouchDBChunkRange
// or JournalChunkRange), current its tweak values.
//
//  1. Chunk ranges: starting from my [Min,Max], intersect the range of
//     every other accepted node. Quirk kept from upstream: an accepted
//     node without a node_chunk_info entry resets the running range to
//     [0,0] instead of narrowing it. Empty ⇒ VerdictIncompatible, unless
//     o.IgnoreVersionCheck.
//  2. Tweaks (unless o.DisableCheckingConfigMismatch): TweakMismatch of
//     the PREFERRED set (current if absent or null) against current; any
//     difference ⇒ VerdictMismatched.
//  3. Lock: if locked, VerdictNodeCleaned or VerdictNodeLocked when me is
//     not accepted (cleaned decides), else VerdictLocked.
//
// Otherwise VerdictOK.
func Check(m *Milestone, me string, my ChunkRange, current TweakValues, o CheckOptions) Verdict {
	if m == nil {
		m = &Milestone{AcceptedNodes: []string{me}}
	}
	lo, hi := my.Min, my.Max
	for _, node := range m.AcceptedNodes {
		if node == me {
			continue
		}
		if r, ok := m.NodeChunkInfo[node]; ok {
			lo, hi = max(lo, r.Min), min(hi, r.Max)
		} else {
			lo, hi = 0, 0
		}
	}
	if hi < lo && !o.IgnoreVersionCheck {
		return Verdict{Kind: VerdictIncompatible}
	}

	if !o.DisableCheckingConfigMismatch {
		cur := current.Extract(templateKeys)
		preferred, ok := m.TweakValues[PreferredNode]
		if !ok || preferred.null {
			preferred = cur
		}
		if diffs := TweakMismatch(preferred, cur); len(diffs) > 0 {
			return Verdict{Kind: VerdictMismatched, Diffs: diffs, Preferred: preferred.Clone()}
		}
	}

	if m.Locked {
		accepted := false
		for _, node := range m.AcceptedNodes {
			if node == me {
				accepted = true
				break
			}
		}
		switch {
		case accepted:
			return Verdict{Kind: VerdictLocked}
		case m.Cleaned:
			return Verdict{Kind: VerdictNodeCleaned}
		default:
			return Verdict{Kind: VerdictNodeLocked}
		}
	}
	return Verdict{Kind: VerdictOK}
}
