package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/docid"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/replicate"
	"github.com/livesync-go/livesync-go/engine/store"
)

// couchConn is an opened CouchDB database (not contacted yet) and what
// is needed to ask its server directly.
type couchConn struct {
	db             *couchdb.DB
	server         *url.URL // the server, without the database
	user, password string
}

// openCouch resolves the password of spec and opens its database.
func (e *cliEnv) openCouch(spec remoteSpec, f commonFlags) (couchConn, error) {
	password := spec.password
	if f.passwordArg != "" || f.passwordFile != "" || password == "" {
		prompt := ""
		if spec.user != "" {
			prompt = "Password for " + spec.user + " at " + spec.url.Host + ": "
		}
		p, err := e.secret(secretSource{what: "password", insecureArg: f.passwordArg, file: f.passwordFile,
			envVar: "LIVESYNC_PASSWORD", configFile: spec.cfg.PasswordFile, prompt: prompt})
		if err != nil {
			return couchConn{}, err
		}
		if p != "" {
			password = p
		}
	}
	if spec.user != "" && password == "" {
		return couchConn{}, usageError{"no password for " + spec.user + ": set LIVESYNC_PASSWORD, use --password-file, or run on a terminal to be asked"}
	}
	server := *spec.url
	path := strings.Trim(server.Path, "/")
	database := path
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		database = path[i+1:]
		server.Path = "/" + path[:i]
	} else {
		server.Path = ""
	}
	db, err := couchdb.New(couchdb.Config{URL: server.String(), Database: database, User: spec.user, Password: password})
	if err != nil {
		return couchConn{}, usageError{err.Error()}
	}
	return couchConn{db: db, server: &server, user: spec.user, password: password}, nil
}

// couchRemote is a CouchDB database holding a LiveSync vault.
type couchRemote struct {
	id       string
	db       *couchdb.DB
	codec    *livesync.Codec
	readOnly bool // connected to read only: replications leave no checkpoint on it
}

var _ remote = (*couchRemote)(nil)

func (e *cliEnv) connectCouch(spec remoteSpec, r *replica, o connectOptions) (_ remote, err error) {
	ctx := e.ctx
	id := spec.String()
	fail := func(err error) (remote, error) {
		var ue usageError
		if errors.As(err, &ue) {
			return nil, err
		}
		return nil, &remoteError{remote: id, err: err}
	}
	cc, err := e.openCouch(spec, o.flags)
	if err != nil {
		return nil, err
	}
	db := cc.db
	defer func() {
		if err != nil {
			db.Close()
		}
	}()

	// The vault's preferred settings, from the milestone (absent on a new
	// database, or when the database itself is missing).
	var pref negotiate.TweakValues
	hasPref := false
	switch raw, err := db.GetLocal(ctx, strings.TrimPrefix(negotiate.MilestoneDocID, "_local/")); {
	case err == nil:
		m, perr := negotiate.ParseMilestone(raw)
		if perr != nil {
			return fail(perr)
		}
		pref, hasPref = m.TweakValues[negotiate.PreferredNode]
	case !errors.Is(err, engine.ErrNotFound):
		return fail(err)
	}
	explicit := spec.cfg.vaultConfig.merge(o.newVault)
	tv, settings, err := vaultSettings(r, pref, hasPref, explicit, false)
	if err != nil {
		return fail(err)
	}
	if needsPassphrase(settings) {
		if settings.Passphrase, err = e.passphraseFor(&spec, o.flags); err != nil {
			return nil, err
		}
	}
	if needsPassphrase(settings) && r.vault != nil {
		if err := checkLocalPassphrase(ctx, r, settings); err != nil {
			return nil, err
		}
	}
	node, err := r.nodeID(ctx)
	if err != nil {
		return nil, err
	}
	hs := couchdb.HandshakeOptions{NodeID: node, Device: deviceInfoFor(o.deviceName, r, spec), Settings: tv,
		CreateIfMissing: o.create, Check: o.check}
	// First without writing anything: the salt, the verdict, and the
	// passphrase proven against the remote's data. Only then does this
	// device register (or join), so a refused or failed attempt leaves
	// no trace on the remote.
	probe := hs
	probe.ReadOnly = true
	first, err := db.HandshakeInfo(ctx, probe)
	if err != nil {
		return fail(err)
	}
	c := &couchRemote{id: id, db: db, readOnly: o.readOnly}
	if first.Salt != nil || !needsPassphrase(settings) {
		if c.codec, err = livesync.New(livesync.Config{Settings: settings, Salt: first.Salt}); err != nil {
			return fail(err)
		}
	}
	if c.codec != nil && needsPassphrase(settings) {
		if err := c.checkPassphrase(ctx); err != nil {
			return fail(err)
		}
	}
	if o.readOnly {
		if c.codec == nil || !first.Exists {
			return fail(errNoVaultYet)
		}
		if err := r.setVault(ctx, tv); err != nil {
			return nil, err
		}
		return c, nil
	}
	if hs.AllowJoin, err = e.admit(r, spec, o.flags, first.Milestone, first.Verdict); err != nil {
		return fail(err)
	}
	salt, _, err := db.Handshake(ctx, hs)
	if err != nil {
		return fail(err)
	}
	if first.Salt != nil && !bytes.Equal(first.Salt, salt) {
		return fail(errRekeyedMeanwhile)
	}
	if c.codec == nil {
		if c.codec, err = livesync.New(livesync.Config{Settings: settings, Salt: salt}); err != nil {
			return fail(err)
		}
	}
	if err := r.setVault(ctx, tv); err != nil {
		return nil, err
	}
	return c, nil
}

// checkPassphrase decodes a few of the remote's encrypted documents, so
// that a wrong passphrase is found before anything is written anywhere
// (a push with a wrong passphrase would otherwise upload data no other
// device can read).
func (c *couchRemote) checkPassphrase(ctx context.Context) error {
	page, err := c.db.Changes(ctx, engine.ChangesRequest{Limit: 50})
	if err != nil {
		return err
	}
	var refs []engine.DocRev
	for _, ch := range page.Results {
		if ch.Deleted || docid.IsSystemID(ch.ID) || len(ch.Revs) == 0 {
			continue
		}
		refs = append(refs, engine.DocRev{ID: ch.ID, Rev: ch.Revs[0]})
		if len(refs) == 10 {
			break
		}
	}
	if len(refs) == 0 {
		return nil
	}
	docs, err := c.db.BulkGet(ctx, refs)
	if err != nil {
		return err
	}
	for _, raw := range docs {
		d, err := livesync.ParseDoc(raw)
		if err != nil {
			continue
		}
		if _, err := c.codec.DecodeRemote(d); errors.Is(err, engine.ErrDecrypt) {
			return &passphraseError{remote: c.id, docID: d.ID()}
		}
	}
	return nil
}

func (c *couchRemote) Milestone(ctx context.Context) (*negotiate.Milestone, error) {
	return c.db.ReadMilestone(ctx)
}

func (c *couchRemote) UpdateMilestone(ctx context.Context, me string, fn func(*negotiate.Milestone, bool) (bool, error)) (*negotiate.Milestone, error) {
	return c.db.UpdateMilestone(ctx, me, time.Now(), fn)
}

func (c *couchRemote) ChunkRange() negotiate.ChunkRange { return negotiate.CouchDBChunkRange }

// Reset destroys the database and creates it again, empty.
func (c *couchRemote) Reset(ctx context.Context) error {
	if err := c.db.Destroy(ctx); err != nil && !errors.Is(err, engine.ErrNotFound) {
		return err
	}
	return c.db.Create(ctx)
}

func (c *couchRemote) ForgetCheckpoint(context.Context) error { return nil }

func (c *couchRemote) wrapErr(err error) error { return c.wrap(err) }

func (c *couchRemote) ID() string                 { return c.id }
func (c *couchRemote) Codec() *livesync.Codec     { return c.codec }
func (c *couchRemote) Chunks() engine.ChunkSource { return c.db.ChunkSource(c.codec) }
func (c *couchRemote) Close() error               { return c.db.Close() }

func (c *couchRemote) Replicate(ctx context.Context, local store.Store, localID string, dir replicate.Direction, o replicateOptions) (syncResult, error) {
	var localEP, remoteEP engine.Endpoint = local, chunksFirst{c.db}
	if o.written != nil {
		localEP = countWrites{localEP, func(n int) { o.written(replicate.Pull, n) }}
		remoteEP = countWrites{remoteEP, func(n int) { o.written(replicate.Push, n) }}
	}
	cfg := replicate.Config{Local: localEP, Remote: replicate.Transform(remoteEP, c.codec),
		LocalID: localID, RemoteID: c.id, Progress: o.progress, Log: o.log, ReadOnlyRemote: c.readOnly}
	if o.holder != nil {
		cfg.Holder, cfg.HoldSource = o.holder, c.id
	}
	if o.metadataOnly {
		cfg.Selector = replicate.ChunksOnlineSelector
	}
	rep, err := replicate.New(cfg)
	if err != nil {
		return syncResult{}, err
	}
	defer rep.Close()
	if o.live {
		return syncResult{}, c.wrap(rep.Live(ctx, dir))
	}
	var res replicate.Result
	switch dir {
	case replicate.Pull:
		res, err = rep.Pull(ctx)
	case replicate.Push:
		res, err = rep.Push(ctx)
	default:
		res, err = rep.Sync(ctx)
	}
	return syncResult{Result: res}, c.wrap(err)
}

// wrap names the remote in its errors (the local replica's errors are
// already *localError and keep their own name).
func (c *couchRemote) wrap(err error) error {
	var le *localError
	if err == nil || errors.As(err, &le) || errors.Is(err, context.Canceled) {
		return err
	}
	return &remoteError{remote: c.id, err: err}
}

// Files pages through the remote's changes without chunks, reads the
// metadata documents and decodes them.
func (c *couchRemote) Files(ctx context.Context) ([]livesync.Meta, error) {
	var out []livesync.Meta
	since := ""
	for {
		page, err := c.db.Changes(ctx, engine.ChangesRequest{Since: since, Limit: 100, Selector: replicate.ChunksOnlineSelector})
		if err != nil {
			return nil, c.wrap(err)
		}
		var refs []engine.DocRev
		for _, ch := range page.Results {
			if docid.IsSystemID(ch.ID) || docid.IsChunkID(ch.ID) || len(ch.Revs) == 0 {
				continue
			}
			refs = append(refs, engine.DocRev{ID: ch.ID, Rev: ch.Revs[0]})
		}
		if len(refs) > 0 {
			docs, err := c.db.BulkGet(ctx, refs)
			if err != nil {
				return nil, c.wrap(err)
			}
			for _, raw := range docs {
				d, err := livesync.ParseDoc(raw)
				if err != nil {
					continue
				}
				if d, err = c.codec.DecodeRemote(d); err != nil {
					return nil, c.wrap(err)
				}
				if !d.IsFileDoc() {
					continue
				}
				m, err := livesync.ParseMeta(d)
				if err != nil {
					continue
				}
				out = append(out, m)
			}
		}
		if len(page.Results) == 0 || page.Pending == 0 || page.LastSeq == since {
			return out, nil
		}
		since = page.LastSeq
	}
}

// chunksFirst is a remote endpoint whose bulk writes send a batch's chunks
// in one request and, only once the server has stored all of them, its
// other documents in a second: a server (CouchDB sorts a request's
// documents by id) never holds metadata whose chunks were not stored
// first, even if a push stops between the two requests. A chunk the
// server refuses fails the batch, so its metadata is not sent.
type chunksFirst struct{ engine.Endpoint }

func (c chunksFirst) BulkDocs(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	var chunks, others []json.RawMessage
	for _, d := range docs {
		if docid.IsChunkID(rawDocID(d)) {
			chunks = append(chunks, d)
		} else {
			others = append(others, d)
		}
	}
	if len(chunks) == 0 || len(others) == 0 {
		return c.Endpoint.BulkDocs(ctx, docs)
	}
	res, err := c.Endpoint.BulkDocs(ctx, chunks)
	if err != nil {
		return nil, err
	}
	for _, r := range res {
		if r.Error != "" {
			return nil, &engine.Error{Op: "bulk write chunks", DocID: r.ID, Stage: engine.StageProtocol,
				Err: fmt.Errorf("the server refused a chunk (%s: %s); the metadata naming it is not sent", r.Error, r.Reason)}
		}
	}
	more, err := c.Endpoint.BulkDocs(ctx, others)
	if err != nil {
		return nil, err
	}
	return append(res, more...), nil
}

// rawDocID reads a document's _id.
func rawDocID(raw json.RawMessage) string {
	var d struct {
		ID string `json:"_id"`
	}
	_ = json.Unmarshal(raw, &d)
	return d.ID
}

// countWrites reports the documents each bulk write stored (live runs
// print them: the replicator's progress counts restart with every pass).
type countWrites struct {
	engine.Endpoint
	fn func(n int)
}

func (c countWrites) BulkDocs(ctx context.Context, docs []json.RawMessage) ([]engine.BulkDocResult, error) {
	res, err := c.Endpoint.BulkDocs(ctx, docs)
	if err == nil {
		n := 0
		for _, r := range res {
			if r.Error == "" {
				n++
			}
		}
		if n > 0 {
			c.fn(n)
		}
	}
	return res, err
}
