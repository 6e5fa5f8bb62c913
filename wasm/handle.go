//go:build js && wasm

package main

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"syscall/js"
	"time"

	"github.com/livesync-go/livesync-go/engine/replicate"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// handle is one open vault as JS sees it.
type handle struct {
	ctx    context.Context // ends at close
	cancel context.CancelFunc
	st     store.Store
	v      *vault.Vault
	remote vault.Remote
	linkMu sync.Mutex
	link   *vault.Link // the remote's link; relink renews it
	events *dispatcher
	closed atomic.Bool
	// passphrase is the vault's E2EE passphrase ("" if none), which
	// doctor checks the remote's data with.
	passphrase string
	// closers run first when the handle shuts down (the P2P peers
	// serving its replica).
	closersMu sync.Mutex
	closers   []func()
}

// handleExtensions add the methods of optional parts of the build (a
// build tag may leave their files out) to each handle's object.
var handleExtensions []func(h *handle, o js.Value)

// onShutdown registers fn to run when the handle shuts down; false if it
// has already.
func (h *handle) onShutdown(fn func()) bool {
	h.closersMu.Lock()
	defer h.closersMu.Unlock()
	if h.closed.Load() {
		return false
	}
	h.closers = append(h.closers, fn)
	return true
}

// shutdown releases everything open opened, in reverse order.
func (h *handle) shutdown() {
	h.closersMu.Lock()
	h.closed.Store(true)
	closers := h.closers
	h.closers = nil
	h.closersMu.Unlock()
	for _, fn := range closers {
		fn()
	}
	openHandles.remove(h)
	h.cancel()
	if h.events != nil {
		h.events.stop()
	}
	if h.v != nil {
		h.v.Close()
	}
	if h.remote != nil {
		h.remote.Close()
	}
	if h.st != nil {
		h.st.Close()
	}
}

// method is a JS method of the handle: after close it fails with
// vault.ErrClosed (code "closed"), also when close ends it midway.
func (h *handle) method(parse func(args []js.Value) (func() (any, error), error)) js.Func {
	return method(func(args []js.Value) (func() (any, error), error) {
		if h.closed.Load() {
			return nil, vault.ErrClosed
		}
		run, err := parse(args)
		if err != nil {
			return nil, err
		}
		return func() (any, error) {
			v, err := run()
			if err != nil && h.closed.Load() {
				return nil, vault.ErrClosed
			}
			return v, err
		}, nil
	})
}

// object is the handle's JS object.
func (h *handle) object() js.Value {
	o := object()
	o.Set("sync", h.method(func(args []js.Value) (func() (any, error), error) {
		return h.replicate(replicate.Sync, arg(args, 0))
	}))
	o.Set("pull", h.method(func(args []js.Value) (func() (any, error), error) {
		return h.replicate(replicate.Pull, arg(args, 0))
	}))
	o.Set("push", h.method(func(args []js.Value) (func() (any, error), error) {
		return h.replicate(replicate.Push, arg(args, 0))
	}))
	o.Set("live", h.method(h.live))
	o.Set("list", h.method(h.list))
	o.Set("read", h.method(h.read))
	o.Set("write", h.method(h.write))
	o.Set("delete", h.method(h.delete))
	o.Set("held", h.method(h.held))
	o.Set("hunt", h.method(h.hunt))
	o.Set("doctor", h.method(h.doctor))
	o.Set("status", h.method(h.status))
	o.Set("close", method(func([]js.Value) (func() (any, error), error) {
		return func() (any, error) { h.shutdown(); return nil, nil }, nil
	}))
	o.Set("on", js.FuncOf(h.on))
	for _, ext := range handleExtensions {
		ext(h, o)
	}
	return o
}

// relink runs the LiveSync handshake with the remote again and returns
// the new link, as the plugin checks the remote before each replication:
// a remote another device rebuilt (locked) or cleaned since the vault
// was opened refuses this replica then (code "locked"), before anything
// of it is pushed into the rebuilt remote.
func (h *handle) relink(ctx context.Context) (*vault.Link, error) {
	h.linkMu.Lock()
	defer h.linkMu.Unlock()
	l, err := h.v.Attach(ctx, h.remote, vault.AttachOptions{})
	if err != nil {
		return nil, err
	}
	h.link = l
	return l, nil
}

// syncOptions checks that the vault has a remote and reads a
// replication's options: {metadataOnly}.
func (h *handle) syncOptions(o js.Value) (metadataOnly bool, err error) {
	if h.remote == nil {
		return false, &optionsError{msg: "the vault was opened without a remote"}
	}
	return boolean(o, "metadataOnly")
}

// replicate is sync, pull or push: {metadataOnly} for a pull.
func (h *handle) replicate(dir replicate.Direction, o js.Value) (func() (any, error), error) {
	meta, err := h.syncOptions(o)
	if err != nil {
		return nil, err
	}
	return func() (any, error) {
		l, err := h.relink(h.ctx)
		if err != nil {
			return nil, err
		}
		res, err := h.v.Replicate(h.ctx, l, dir, vault.SyncOptions{MetadataOnly: meta})
		if err != nil {
			return nil, err
		}
		return map[string]any{"pull": progress(res.Pull), "push": progress(res.Push)}, nil
	}, nil
}

// live({metadataOnly}) starts a live sync (both directions, until
// stopped or closed) and resolves to {stop(), done}: done settles when
// the sync ends (resolved when stopped or closed, rejected when it
// failed), and stop() ends it and returns done.
func (h *handle) live(args []js.Value) (func() (any, error), error) {
	meta, err := h.syncOptions(arg(args, 0))
	if err != nil {
		return nil, err
	}
	return func() (any, error) {
		l, err := h.relink(h.ctx)
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithCancel(h.ctx)
		ended := make(chan error, 1)
		go func() {
			_, err := h.v.Sync(ctx, l, vault.SyncOptions{Live: true, MetadataOnly: meta})
			ended <- err
		}()
		done := async(func() (any, error) {
			err := <-ended
			cancel()
			if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled) || errors.Is(err, vault.ErrClosed)) {
				return nil, nil
			}
			return nil, err
		})
		done.Call("catch", ignore) // a failure nobody awaits is no unhandled rejection
		ctrl := object()
		ctrl.Set("done", done)
		ctrl.Set("stop", js.FuncOf(func(js.Value, []js.Value) any {
			cancel()
			return done
		}))
		return ctrl, nil
	}, nil
}

func progress(p replicate.Progress) map[string]any {
	return map[string]any{"read": p.DocsRead, "written": p.DocsWritten, "failures": p.WriteFailures}
}

// list(prefix, {deleted}) lists the files under prefix.
func (h *handle) list(args []js.Value) (func() (any, error), error) {
	prefix := ""
	if p := arg(args, 0); p.Type() == js.TypeString {
		prefix = p.String()
	}
	deleted, err := boolean(arg(args, 1), "deleted")
	if err != nil {
		return nil, err
	}
	return func() (any, error) {
		files, err := h.v.List(h.ctx, prefix, vault.ListOptions{Deleted: deleted})
		if err != nil {
			return nil, err
		}
		out := make([]any, 0, len(files))
		for _, f := range files {
			out = append(out, fileObject(f))
		}
		return out, nil
	}, nil
}

func fileObject(f vault.File) map[string]any {
	return map[string]any{
		"path": f.Meta.Path, "size": f.Meta.Size, "mtime": f.Meta.MTime, "ctime": f.Meta.CTime,
		"rev": f.Meta.Rev, "deleted": f.Meta.Deleted, "held": f.Held(),
		"chunks": f.Chunks, "localChunks": f.LocalChunks,
	}
}

// path reads a path argument.
func path(args []js.Value) (string, error) {
	p := arg(args, 0)
	if p.Type() != js.TypeString || p.String() == "" {
		return "", &optionsError{msg: "the path must be a non-empty string"}
	}
	return p.String(), nil
}

// read(path, {text}) returns the file's bytes (a Uint8Array), or its
// text with {text: true}.
func (h *handle) read(args []js.Value) (func() (any, error), error) {
	p, err := path(args)
	if err != nil {
		return nil, err
	}
	text, err := boolean(arg(args, 1), "text")
	if err != nil {
		return nil, err
	}
	return func() (any, error) {
		data, err := h.v.Read(h.ctx, p)
		if err != nil {
			return nil, err
		}
		if text {
			return string(data), nil
		}
		return uint8Array(data), nil
	}, nil
}

// write(path, data, {mtime, ctime}) writes a file; times are
// milliseconds since the epoch.
func (h *handle) write(args []js.Value) (func() (any, error), error) {
	p, err := path(args)
	if err != nil {
		return nil, err
	}
	data, err := bytesArg(arg(args, 1))
	if err != nil {
		return nil, err
	}
	var wo vault.WriteOptions
	for key, dst := range map[string]*time.Time{"mtime": &wo.MTime, "ctime": &wo.CTime} {
		ms, err := number(arg(args, 2), key)
		if err != nil {
			return nil, err
		}
		if ms != 0 {
			*dst = time.UnixMilli(int64(ms))
		}
	}
	return func() (any, error) {
		res, err := h.v.Write(h.ctx, p, data, wo)
		if err != nil {
			return nil, err
		}
		out := fileObject(vault.File{Meta: res.Meta})
		out["unchanged"], out["newChunks"] = res.Unchanged, res.NewChunks
		delete(out, "chunks")
		delete(out, "localChunks")
		delete(out, "held")
		return out, nil
	}, nil
}

// delete(path) deletes a file (a deleted revision, as the plugin writes).
func (h *handle) delete(args []js.Value) (func() (any, error), error) {
	p, err := path(args)
	if err != nil {
		return nil, err
	}
	return func() (any, error) {
		m, err := h.v.Delete(h.ctx, p)
		if err != nil {
			return nil, err
		}
		return map[string]any{"path": m.Path, "rev": m.Rev}, nil
	}, nil
}

// held() lists the files whose chunks have not all arrived.
func (h *handle) held([]js.Value) (func() (any, error), error) {
	return func() (any, error) {
		files, err := h.v.Held(h.ctx)
		if err != nil {
			return nil, err
		}
		return heldObjects(files), nil
	}, nil
}

// heldObjects are held files as JS sees them: their FileInfo, the
// chunks they lack, where their metadata came from, since when they are
// held, and what the last hunt found (lastAttempt, lastResult, and
// reasons after a hunt).
func heldObjects(files []vault.HeldFile) []any {
	out := make([]any, 0, len(files))
	for _, f := range files {
		o := fileObject(f.File)
		o["missing"], o["source"] = len(f.Missing), f.Source
		if !f.Since.IsZero() {
			o["since"] = f.Since.UnixMilli()
		}
		if !f.LastAttempt.IsZero() {
			o["lastAttempt"], o["lastResult"] = f.LastAttempt.UnixMilli(), f.LastResult
		}
		if f.Reasons != nil {
			reasons := make([]any, 0, len(f.Reasons))
			for _, r := range f.Reasons {
				reasons = append(reasons, reasonObject(r))
			}
			o["reasons"] = reasons
		}
		out = append(out, o)
	}
	return out
}

// status() resolves to a snapshot of the vault for a status display:
// {held, pendingChunks, heldPaths, files, deleted, docs, chunks,
// remotes, fetch}. held counts the held files and pendingChunks the
// distinct chunks they lack; files and deleted count the live and the
// deleted files; remotes are what the replica remembers of each remote.
func (h *handle) status([]js.Value) (func() (any, error), error) {
	return func() (any, error) {
		s, err := h.v.Status(h.ctx)
		if err != nil {
			return nil, err
		}
		paths := make([]any, len(s.HeldPaths))
		for i, p := range s.HeldPaths {
			paths[i] = p
		}
		remotes := make([]any, 0, len(s.Remotes))
		for id, r := range s.Remotes {
			o := map[string]any{"id": id, "attached": r.Attached, "quarantined": len(r.Quarantined)}
			if !r.LastPull.IsZero() {
				o["lastPull"] = r.LastPull.UnixMilli()
			}
			if !r.LastPush.IsZero() {
				o["lastPush"] = r.LastPush.UnixMilli()
			}
			remotes = append(remotes, o)
		}
		return map[string]any{
			"held": s.Held, "pendingChunks": s.MissingChunks, "heldPaths": paths,
			"files": s.Files, "deleted": s.Deleted, "docs": s.Docs, "chunks": s.Chunks,
			"remotes": remotes,
			"fetch": map[string]any{"pending": s.Fetch.Pending(), "inFlight": s.Fetch.InFlight,
				"requests": s.Fetch.Requests, "delivered": s.Fetch.Delivered, "failures": s.Fetch.Failures},
		}, nil
	}, nil
}
