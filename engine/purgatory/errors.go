package purgatory

import (
	"context"
	"errors"
	"fmt"

	"github.com/livesync-go/livesync-go/engine"
)

// ErrClosed is returned by Hold and Retry after Close.
var ErrClosed = errors.New("purgatory: closed")

// ErrNotEmpty is returned by Restore when the purgatory already holds
// or remembers something: Restore must come first.
var ErrNotEmpty = errors.New("purgatory: restore into a purgatory that is in use")

// ReleaseError reports a release of one revision that Deps.Release
// refused. Permanent is true for a failed verification (the revision
// cannot be decrypted, is malformed or has the wrong size): the revision
// is dropped and remembered as rejected, never served. Otherwise the
// revision stays held and the release is tried again.
type ReleaseError struct {
	Doc       string
	Rev       string
	Permanent bool
	Err       error
}

func (e *ReleaseError) Error() string {
	kind := "failed"
	if e.Permanent {
		kind = "failed verification"
	}
	return fmt.Sprintf("purgatory: release of %q rev %s %s: %v", e.Doc, e.Rev, kind, e.Err)
}

func (e *ReleaseError) Unwrap() error { return e.Err }

// releaseClass is what a Deps.Release error means for the revision.
type releaseClass uint8

const (
	releaseOK        releaseClass = iota
	releaseRejected               // verification failed: drop, remember, never serve
	releaseMissing                // a chunk is not local after all: recheck, keep held
	releaseGone                   // the revision is no longer in the store: drop quietly
	releaseTransient              // storage, cancellation, anything else: keep, retry later
)

// classify maps a Deps.Release error to its rule. Decided by error type,
// never by text.
func classify(err error) releaseClass {
	switch {
	case err == nil:
		return releaseOK
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return releaseTransient
	case errors.Is(err, engine.ErrMissingChunk):
		return releaseMissing
	case errors.Is(err, engine.ErrDecrypt), errors.Is(err, engine.ErrSizeMismatch),
		errors.Is(err, engine.ErrMalformed), errors.Is(err, engine.ErrUnsupported):
		return releaseRejected
	case errors.Is(err, engine.ErrNotFound):
		return releaseGone
	}
	return releaseTransient
}
