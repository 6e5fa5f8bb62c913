//go:build js && wasm

package main

import (
	"context"
	"errors"
	"syscall/js"
	"time"

	"github.com/livesync-go/livesync-go/engine/vault"
)

// hunt({once, timeout}) fetches the chunks the held files lack from the
// remote and resolves to what it did: {released, held, sources, found,
// total, timedOut}. With once it asks the remote once for every missing
// chunk; without, it keeps hunting (backing off) until every held file
// is released or the vault is closed. timeout (milliseconds) bounds the
// wait: when it ends, the hunt stops and resolves with what is still
// held (timedOut: true).
func (h *handle) hunt(args []js.Value) (func() (any, error), error) {
	o := arg(args, 0)
	once, err := boolean(o, "once")
	if err != nil {
		return nil, err
	}
	ms, err := number(o, "timeout")
	if err != nil {
		return nil, err
	}
	if ms < 0 {
		return nil, &optionsError{msg: "option timeout must be a positive number of milliseconds"}
	}
	return func() (any, error) {
		ctx := h.ctx
		if ms > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(h.ctx, time.Duration(ms*float64(time.Millisecond)))
			defer cancel()
		}
		var before []vault.HeldFile // what a timeout compares with
		if ms > 0 {
			var err error
			if before, err = h.v.Held(h.ctx); err != nil {
				return nil, err
			}
		}
		res, err := h.v.Hunt(ctx, vault.HuntOptions{Once: once})
		if err != nil && ms > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) && h.ctx.Err() == nil {
			return h.huntTimedOut(before)
		}
		if err != nil {
			return nil, err
		}
		return huntObject(res, false), nil
	}, nil
}

// huntTimedOut is the result of a hunt its timeout ended: the files held
// before it that are not now were released.
func (h *handle) huntTimedOut(before []vault.HeldFile) (any, error) {
	after, err := h.v.Held(h.ctx)
	if err != nil {
		return nil, err
	}
	still := map[string]bool{}
	for _, f := range after {
		still[f.Meta.ID] = true
	}
	var released []vault.HeldFile
	for _, f := range before {
		if !still[f.Meta.ID] {
			released = append(released, f)
		}
	}
	return huntObject(vault.HuntResult{Released: released, Held: after}, true), nil
}

// huntObject is a hunt's result as JS sees it. found counts the chunks
// the released files were missing, total those every hunted file was.
func huntObject(res vault.HuntResult, timedOut bool) map[string]any {
	found, total := 0, 0
	for _, f := range res.Released {
		found += len(f.Missing)
		total += len(f.Missing)
	}
	for _, f := range res.Held {
		total += len(f.Missing)
	}
	sources := make([]any, 0, len(res.Sources))
	for _, s := range res.Sources {
		sources = append(sources, map[string]any{
			"remote": s.Remote, "canFetch": s.CanFetch,
			"requests": s.Stats.Requests, "found": s.Stats.Found, "missing": s.Stats.Missing,
			"failed": s.Stats.Failed, "chunks": s.Stats.Chunks,
		})
	}
	return map[string]any{
		"released": heldObjects(res.Released), "held": heldObjects(res.Held), "sources": sources,
		"found": found, "total": total, "timedOut": timedOut,
	}
}

// reasonObject says why chunks of a file are still held after a hunt:
// how many, the remote that failed (source) with the failure's code, or
// "missing_chunks" when no remote had them.
func reasonObject(r vault.Reason) map[string]any {
	o := map[string]any{"chunks": r.Chunks, "message": r.Text(nil), "code": CodeMissingChunks}
	if r.Source != "" {
		o["source"] = r.Source
	}
	if r.Err != nil {
		o["code"] = classify(r.Err).Code
	}
	return o
}
