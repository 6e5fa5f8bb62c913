package main

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	diag "github.com/livesync-go/livesync-go/engine/negotiate/doctor"
	"github.com/livesync-go/livesync-go/engine/vault"
	"github.com/livesync-go/livesync-go/wasm/internal/idb"
)

// Error codes: the stable names a JS caller tests (Error.code). A
// caller decides by code, never by message.
const (
	CodeCancelled        = "cancelled"         // the operation's context ended (close, or a stopped live sync)
	CodeClosed           = "closed"            // the vault handle was closed
	CodeBadOptions       = "bad_options"       // open's options or a call's arguments are wrong
	CodeNeedPassphrase   = "need_passphrase"   // the vault is encrypted and no passphrase was given
	CodeWrongPassphrase  = "wrong_passphrase"  // the passphrase does not decrypt the vault's data
	CodeLocked           = "locked"            // the remote was rebuilt or cleaned by another device
	CodeSettingsMismatch = "settings_mismatch" // the vault's settings differ from the remote's
	CodeIncompatible     = "incompatible"      // a newer client wrote the remote
	CodeUnauthorized     = "unauthorized"      // the server refused the credentials
	CodeUnreachable      = "unreachable"       // the server could not be reached, or failed
	CodeNoDatabase       = "no_database"       // the remote database does not exist
	CodeNoVault          = "no_vault"          // neither the replica nor the options define a vault
	CodeMissingChunks    = "missing_chunks"    // a file's chunks are neither local nor fetchable
	CodeNotFound         = "not_found"         // no such file or document
	CodeBadPath          = "bad_path"          // not a vault path
	CodeTooLarge         = "too_large"         // the server refused a request as too large
	CodeMalformed        = "malformed"         // data does not follow the LiveSync format
	CodeUnsupported      = "unsupported"       // a format or setting the engine does not implement
	CodeBusy             = "busy"              // the replica's storage is open in another tab, window or handle
	CodeError            = "error"             // anything else
)

// optionsError is a mistake in the options or arguments a caller passed;
// err is the cause, if any (a wrong setup passphrase is still
// "wrong_passphrase").
type optionsError struct {
	msg string
	err error
}

func (e *optionsError) Error() string { return e.msg }
func (e *optionsError) Unwrap() error { return e.err }

// errorInfo is what a JS Error carries besides its message.
type errorInfo struct {
	Code, Stage, DocID string
}

// classify names the code of err and, where the engine reported them, the
// stage and document that failed. The checks go from the most specific
// to the most general: a wrong passphrase is reported as such even when
// it surfaced while talking to a remote.
func classify(err error) errorInfo {
	var info errorInfo
	var ee *engine.Error
	if errors.As(err, &ee) {
		info.Stage, info.DocID = string(ee.Stage), ee.DocID
	}
	var pe *vault.PassphraseError
	if errors.As(err, &pe) && info.DocID == "" {
		info.DocID = pe.DocID
	}
	info.Code = codeOf(err, ee)
	return info
}

func codeOf(err error, ee *engine.Error) string {
	var oe *optionsError
	var le *vault.LockedError
	var tm *negotiate.TweakMismatchError
	var mc *vault.MissingChunksError
	stage := engine.Stage("")
	if ee != nil {
		stage = ee.Stage
	}
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return CodeCancelled
	case errors.Is(err, vault.ErrClosed):
		return CodeClosed
	case errors.Is(err, idb.ErrBusy):
		return CodeBusy
	case errors.Is(err, engine.ErrDecrypt):
		return CodeWrongPassphrase
	case errors.As(err, &oe):
		return CodeBadOptions
	case errors.Is(err, vault.ErrNeedPassphrase):
		return CodeNeedPassphrase
	case errors.As(err, &le), errors.Is(err, negotiate.ErrLocked):
		return CodeLocked
	case errors.As(err, &tm), errors.Is(err, negotiate.ErrTweakMismatch):
		return CodeSettingsMismatch
	case errors.Is(err, negotiate.ErrIncompatible):
		return CodeIncompatible
	case stage == engine.StageAuth:
		return CodeUnauthorized
	case stage == engine.StageTransport:
		return CodeUnreachable
	case errors.Is(err, engine.ErrNoDatabase):
		return CodeNoDatabase
	case errors.Is(err, vault.ErrNoVault):
		return CodeNoVault
	case errors.As(err, &mc), errors.Is(err, engine.ErrMissingChunk):
		return CodeMissingChunks
	case errors.Is(err, engine.ErrNotFound):
		return CodeNotFound
	case errors.Is(err, vault.ErrBadPath):
		return CodeBadPath
	case errors.Is(err, engine.ErrTooLarge):
		return CodeTooLarge
	case errors.Is(err, engine.ErrMalformed):
		return CodeMalformed
	case errors.Is(err, engine.ErrUnsupported):
		return CodeUnsupported
	}
	return CodeError
}

// The classes of problems a doctor reports (diag.Codes), and those of
// the errors it explains (explainedBase + the index of the error's code
// in an explainer's list): findingCode turns them into the codes JS
// sees.
const (
	problemFailed = iota + 1
	problemUnreachable
	problemAuth
	problemRefused
	problemPassphrase
	explainedBase = 100
)

// explainer is a doctor run's diag.Options.Explain: it numbers the codes
// of the errors it explains, in codes.
type explainer struct {
	mu    sync.Mutex
	codes []string
}

func (x *explainer) explain(err error) (int, string) {
	code := classify(err).Code
	x.mu.Lock()
	defer x.mu.Unlock()
	i := slices.Index(x.codes, code)
	if i < 0 {
		i = len(x.codes)
		x.codes = append(x.codes, code)
	}
	return explainedBase + i, err.Error()
}

// actionNames name the actions a finding's advice suggests (its
// actions in JS).
var actionNames = map[diag.Action]string{
	diag.Push: "push", diag.Pull: "pull", diag.PullRebuildLocal: "pull-rebuild-local",
	diag.PullFresh: "pull-fresh", diag.Unlock: "unlock", diag.PushRebuild: "push-rebuild",
}

// findingCode is the error code of a problem: the code of the error it
// explains, else the class of problem; a refusal is named by what
// refused (the database or bucket is missing, a newer client wrote the
// remote, its milestone locks this device out or wants other settings,
// its salt is damaged).
func findingCode(f vault.Finding, x *explainer) string {
	switch f.Code {
	case problemUnreachable:
		return CodeUnreachable
	case problemAuth:
		return CodeUnauthorized
	case problemPassphrase:
		return CodeWrongPassphrase
	case problemRefused:
		return refusalCode(f)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if i := f.Code - explainedBase; i >= 0 && i < len(x.codes) {
		return x.codes[i]
	}
	return CodeError
}

func refusalCode(f vault.Finding) string {
	switch f.Check {
	case "database", "bucket":
		return CodeNoDatabase
	case "version":
		return CodeIncompatible
	case "settings":
		return CodeSettingsMismatch
	case "salt":
		return CodeMalformed
	case "milestone":
		// A lock names the actions that let this device in.
		for _, c := range f.Commands {
			if len(c) > 0 && c[0] == actionNames[diag.Unlock] {
				return CodeLocked
			}
		}
		return CodeIncompatible
	}
	return CodeError
}
