package main

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/vault"
	"github.com/livesync-go/livesync-go/wasm/internal/idb"
)

func TestClassify(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("attach: %w", err) }
	cases := []struct {
		err   error
		want  errorInfo
		title string
	}{
		{wrap(&vault.PassphraseError{Remote: "r", DocID: "h:abc"}), errorInfo{Code: CodeWrongPassphrase, DocID: "h:abc"}, "a remote's document does not decrypt"},
		{&engine.Error{Op: "read", DocID: "h:x", Stage: engine.StageDecrypt, Err: engine.ErrDecrypt}, errorInfo{CodeWrongPassphrase, "decrypt", "h:x"}, "a chunk does not decrypt"},
		{wrap(&vault.LockedError{}), errorInfo{Code: CodeLocked}, "locked for this device"},
		{wrap(negotiate.ErrNodeCleaned), errorInfo{Code: CodeLocked}, "cleaned up"},
		{&engine.Error{Op: "get", Stage: engine.StageAuth, Err: errors.New("HTTP 401")}, errorInfo{CodeUnauthorized, "auth", ""}, "credentials refused"},
		{&engine.Error{Op: "get", Stage: engine.StageTransport, Err: errors.New("fetch failed")}, errorInfo{CodeUnreachable, "transport", ""}, "no server"},
		{&engine.Error{Op: "get", DocID: "a.md", Err: engine.ErrNotFound}, errorInfo{Code: CodeNotFound, DocID: "a.md"}, "no such document"},
		{wrap(fmt.Errorf("%w: %w", engine.ErrNoDatabase, engine.ErrNotFound)), errorInfo{Code: CodeNoDatabase}, "no such database"},
		{&vault.MissingChunksError{Path: "a.md", Missing: 1, Total: 2}, errorInfo{Code: CodeMissingChunks}, "chunks missing"},
		{vault.ErrNeedPassphrase, errorInfo{Code: CodeNeedPassphrase}, "no passphrase"},
		{vault.ErrNoVault, errorInfo{Code: CodeNoVault}, "no vault"},
		{vault.ErrClosed, errorInfo{Code: CodeClosed}, "closed"},
		{wrap(context.Canceled), errorInfo{Code: CodeCancelled}, "cancelled"},
		{&optionsError{msg: "bad"}, errorInfo{Code: CodeBadOptions}, "bad options"},
		{&optionsError{msg: "setup URI", err: fmt.Errorf("setupuri: %w", engine.ErrDecrypt)}, errorInfo{Code: CodeWrongPassphrase}, "a wrong setup passphrase"},
		{&optionsError{msg: "setup URI", err: engine.ErrMalformed}, errorInfo{Code: CodeBadOptions}, "a broken setup URI"},
		{fmt.Errorf("%w: x", vault.ErrBadPath), errorInfo{Code: CodeBadPath}, "bad path"},
		{wrap(&negotiate.TweakMismatchError{}), errorInfo{Code: CodeSettingsMismatch}, "settings differ"},
		{wrap(negotiate.ErrIncompatible), errorInfo{Code: CodeIncompatible}, "incompatible"},
		{fmt.Errorf("open: %w", idb.ErrBusy), errorInfo{Code: CodeBusy}, "the replica is open in another tab"},
		{errors.New("something"), errorInfo{Code: CodeError}, "anything else"},
	}
	for _, c := range cases {
		if got := classify(c.err); got != c.want {
			t.Errorf("%s: classify(%v) = %+v, want %+v", c.title, c.err, got, c.want)
		}
	}
}

// TestFindingCode: a doctor's problem carries the code a sync would fail
// with: the explained error's own, the class of problem, or what refused.
func TestFindingCode(t *testing.T) {
	x := &explainer{}
	notFound, _ := x.explain(&engine.Error{Op: "get", Err: engine.ErrNotFound})
	auth, _ := x.explain(&engine.Error{Op: "get", Stage: engine.StageAuth, Err: errors.New("HTTP 401")})
	again, _ := x.explain(&engine.Error{Op: "other", Err: engine.ErrNotFound})
	if again != notFound || auth == notFound {
		t.Fatalf("explained codes %d, %d, %d: one number per code", notFound, auth, again)
	}
	problem := func(check string, code int, commands ...[]string) vault.Finding {
		return vault.Finding{Check: check, Status: vault.FindingProblem, Code: code, Commands: commands}
	}
	cases := []struct {
		f    vault.Finding
		want string
	}{
		{problem("server", problemUnreachable), CodeUnreachable},
		{problem("login", problemAuth), CodeUnauthorized},
		{problem("passphrase", problemPassphrase), CodeWrongPassphrase},
		{problem("passphrase", problemFailed), CodeError},
		{problem("salt", notFound), CodeNotFound},
		{problem("milestone", auth), CodeUnauthorized},
		{problem("database", problemRefused, []string{"push"}), CodeNoDatabase},
		{problem("bucket", problemRefused), CodeNoDatabase},
		{problem("version", problemRefused), CodeIncompatible},
		{problem("settings", problemRefused, []string{"pull-fresh"}, []string{"push-rebuild"}), CodeSettingsMismatch},
		{problem("salt", problemRefused), CodeMalformed},
		{problem("milestone", problemRefused, []string{"pull-rebuild-local"}, []string{"unlock"}), CodeLocked},
		{problem("milestone", problemRefused), CodeIncompatible},
		{problem("chunks", explainedBase+50), CodeError},
	}
	for _, c := range cases {
		if got := findingCode(c.f, x); got != c.want {
			t.Errorf("%s (code %d, commands %v): %q, want %q", c.f.Check, c.f.Code, c.f.Commands, got, c.want)
		}
	}
}
