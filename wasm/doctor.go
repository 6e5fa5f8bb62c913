//go:build js && wasm

package main

import (
	"context"
	"syscall/js"

	"github.com/livesync-go/livesync-go/engine/docid"
	diag "github.com/livesync-go/livesync-go/engine/negotiate/doctor"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// remoteDoctor runs the doctor of one remote kind; complete reports that
// every check ran.
type remoteDoctor func(ctx context.Context, o diag.Options) (findings []vault.Finding, complete bool)

// doctors find the doctor of a remote: each remote kind the build
// includes adds its own (doctor_couchdb.go, doctor_s3.go). nil: not that
// kind.
var doctors []func(vault.Remote) remoteDoctor

// doctor() examines the remote without writing to it (no handshake, no
// milestone update) and resolves to its findings, in the order the
// checks ran: {check, status, message, details?, advice?, actions?,
// code?}. code is set for a problem: the error code that the failure
// would reject a sync with.
func (h *handle) doctor([]js.Value) (func() (any, error), error) {
	if h.remote == nil {
		return nil, &optionsError{msg: "the vault was opened without a remote"}
	}
	var run remoteDoctor
	for _, find := range doctors {
		if run = find(h.remote); run != nil {
			break
		}
	}
	if run == nil {
		return nil, &optionsError{msg: "this build has no doctor for the vault's remote"}
	}
	return func() (any, error) {
		x := &explainer{}
		findings, _ := run(h.ctx, h.doctorOptions(h.ctx, x))
		if err := h.ctx.Err(); err != nil {
			return nil, err
		}
		out := make([]any, 0, len(findings))
		for _, f := range findings {
			out = append(out, findingObject(f, x))
		}
		return out, nil
	}, nil
}

// doctorOptions are the doctor's words for JS, and what the replica
// holds.
func (h *handle) doctorOptions(ctx context.Context, x *explainer) diag.Options {
	o := diag.Options{
		Codes: diag.Codes{Failed: problemFailed, Unreachable: problemUnreachable, Auth: problemAuth,
			Refused: problemRefused, Passphrase: problemPassphrase},
		Explain: x.explain,
		Command: func(a diag.Action) []string { return []string{actionNames[a]} },
		Passphrase: func() (string, error) {
			if h.passphrase == "" {
				return "", vault.ErrNeedPassphrase
			}
			return h.passphrase, nil
		},
		NewVault: vault.DefaultSettings(h.remote.Objects() != nil).TweakValues(),
	}
	o.Local.Present = true
	o.Local.NodeID, o.Local.NodeIDErr = vault.NodeIDIfAny(ctx, h.st)
	if t, err := h.v.TweakValues(); err == nil {
		o.Local.Tweaks = &t
	}
	empty, err := h.v.IsEmpty(ctx)
	o.Local.Empty = err == nil && empty
	o.Local.ChunkIDs = func() []string {
		infos, err := h.st.AllDocs(ctx, store.AllDocsOptions{StartKey: docid.PrefixChunk + "+", EndKey: docid.PrefixChunk + "+\uffff", Limit: 20})
		if err != nil {
			return nil
		}
		ids := make([]string, 0, len(infos))
		for _, in := range infos {
			ids = append(ids, in.ID)
		}
		return ids
	}
	return o
}

// findingObject is a finding as JS sees it.
func findingObject(f vault.Finding, x *explainer) map[string]any {
	o := map[string]any{"check": f.Check, "status": f.Status, "message": f.Message}
	if len(f.Details) > 0 {
		details := make([]any, len(f.Details))
		for i, d := range f.Details {
			details[i] = d
		}
		o["details"] = details
	}
	if f.Advice != "" {
		o["advice"] = f.Advice
	}
	var actions []any
	for _, c := range f.Commands {
		if len(c) > 0 && c[0] != "" {
			actions = append(actions, c[0])
		}
	}
	if actions != nil {
		o["actions"] = actions
	}
	if f.Status == vault.FindingProblem {
		o["code"] = findingCode(f, x)
	}
	return o
}
