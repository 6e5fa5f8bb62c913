package negotiate

import (
	"errors"
	"fmt"
	"strings"
)

// Errors of negotiation. Verdict.Err and CheckVersion return them (wrapped);
// callers test with errors.Is. All of them are permanent for the same
// remote state: retrying without a change on either side gives the same
// answer.
var (
	// ErrNoSalt means the sync parameters carry an empty pbkdf2salt: the
	// salt has not been created yet (see NeedsNewSalt).
	ErrNoSalt = errors.New("negotiate: sync parameters have no salt")
	// ErrLocked means the remote is locked against this node. It is the
	// parent of ErrNodeLocked and ErrNodeCleaned. A remote that is locked
	// but has accepted this node is not an error (VerdictLocked).
	ErrLocked = errors.New("negotiate: remote is locked")
	// ErrNodeLocked means the remote was rebuilt and this node is not
	// among its accepted nodes: fetch the rebuilt remote or unlock it.
	ErrNodeLocked = fmt.Errorf("negotiate: remote was rebuilt and this node is not accepted: %w", ErrLocked)
	// ErrNodeCleaned means the remote was cleaned up and this node is not
	// among its accepted nodes.
	ErrNodeCleaned = fmt.Errorf("negotiate: remote was cleaned up and this node is not accepted: %w", ErrLocked)
	// ErrIncompatible means the remote needs a database or chunk format
	// this node does not support.
	ErrIncompatible = errors.New("negotiate: remote is incompatible")
	// ErrTweakMismatch means this node's must-match tweak values differ
	// from the remote's preferred ones; it is wrapped by a
	// *TweakMismatchError that lists the differences.
	ErrTweakMismatch = errors.New("negotiate: tweak values differ from the remote's preferred values")
)

// TweakMismatchError is the error of a VerdictMismatched verdict. Diffs is
// never empty and is in ShouldMatchKeys order; Preferred is the remote's
// preferred set as stored (without defaults). It unwraps to
// ErrTweakMismatch. Its message names keys and values, which are settings,
// never secrets.
type TweakMismatchError struct {
	Diffs     []TweakDiff
	Preferred TweakValues
}

func (e *TweakMismatchError) Error() string {
	var b strings.Builder
	b.WriteString(ErrTweakMismatch.Error())
	for i, d := range e.Diffs {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s preferred %s, current %s (%s)", d.Key, d.Preferred, d.Current, d.Impact)
	}
	return b.String()
}

// Unwrap returns ErrTweakMismatch.
func (e *TweakMismatchError) Unwrap() error { return ErrTweakMismatch }

// Breaking reports whether any difference is data-breaking (ImpactBreaking):
// adopting either side then requires rebuilding a database.
func (e *TweakMismatchError) Breaking() bool {
	for _, d := range e.Diffs {
		if d.Impact == ImpactBreaking {
			return true
		}
	}
	return false
}

// OnlyLossy reports whether every difference is compatible but lossy
// (ImpactLossy): upstream may then accept the newer side automatically
// (autoAcceptCompatibleTweak, plugin ModuleResolveMismatchedTweaks.ts).
func (e *TweakMismatchError) OnlyLossy() bool {
	if len(e.Diffs) == 0 {
		return false
	}
	for _, d := range e.Diffs {
		if d.Impact != ImpactLossy {
			return false
		}
	}
	return true
}
