package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/livesync-go/livesync-go/adapters/minio"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/e2ee"
	"github.com/livesync-go/livesync-go/engine/hold"
	"github.com/livesync-go/livesync-go/engine/journal"
	"github.com/livesync-go/livesync-go/engine/journalsync"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/purgatory"
	"github.com/livesync-go/livesync-go/engine/replicate"
	"github.com/livesync-go/livesync-go/engine/store"
)

// journalChunkSize is customChunkSize of a new vault on a journal bucket:
// the object-storage preset of the plugin's setup URI generator
// (FORMAT.md §3.8).
const journalChunkSize = 10

// Polling of a live run on a journal bucket: every defaultPollInterval
// (--interval); after failures the pause doubles, up to maxPollBackoff.
const (
	defaultPollInterval = 10 * time.Second
	maxPollBackoff      = 5 * time.Minute
)

// s3Spec is an S3 journal bucket as named by an s3:// URL or by a
// [remote.NAME] table with kind = "s3".
type s3Spec struct {
	endpoint    string // host[:port]
	tls         bool   // HTTPS
	bucket      string
	prefix      string // LiveSync's bucket prefix, as given (may be empty)
	region      string // "" asks the server
	accessKey   string
	secretKey   string // only from an s3:// URL in the configuration file
	caFile      string
	pathStyle   bool
	virtualHost bool
	directFetch bool
}

// id is the bucket's URL without credentials or options:
// s3://host:port/bucket/prefix.
func (s s3Spec) id() *url.URL {
	p := "/" + s.bucket
	if s.prefix != "" {
		p += "/" + s.prefix
	}
	return &url.URL{Scheme: "s3", Host: s.endpoint, Path: p}
}

// parseS3URL parses s3://ACCESS_KEY@host:port/bucket/prefix/?region=…&tls=1
// &virtual-host=1&path-style=1&direct-fetch=1&ca-file=PATH. A secret key
// in a URL given on the command line is refused: other users see it in
// the process list.
func parseS3URL(u *url.URL, fromConfig bool) (remoteSpec, error) {
	spec := remoteSpec{kind: "s3"}
	var s s3Spec
	if u.Host == "" {
		return spec, usageError{"the bucket URL names no server: use s3://ACCESS_KEY@host:port/bucket/prefix/"}
	}
	s.endpoint = u.Host
	if u.User != nil {
		s.accessKey = u.User.Username()
		if p, ok := u.User.Password(); ok {
			if !fromConfig {
				return spec, usageError{"the bucket URL holds a secret key, which other users can see in the process list; " +
					"give it with $LIVESYNC_S3_SECRET_KEY, --password-file or the prompt instead (or --password-insecure-arg if you must)"}
			}
			s.secretKey = p
		}
	}
	s.bucket, s.prefix, _ = strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
	if s.bucket == "" {
		return spec, usageError{fmt.Sprintf("the bucket URL s3://%s%s names no bucket: use s3://ACCESS_KEY@host:port/BUCKET/prefix/", u.Host, u.Path)}
	}
	for k, vs := range u.Query() {
		v := vs[len(vs)-1]
		var flag *bool
		switch k {
		case "region":
			s.region = v
			continue
		case "ca-file":
			s.caFile = v
			continue
		case "tls":
			flag = &s.tls
		case "virtual-host":
			flag = &s.virtualHost
		case "path-style":
			flag = &s.pathStyle
		case "direct-fetch":
			flag = &s.directFetch
		default:
			return spec, usageError{fmt.Sprintf("the bucket URL has an unknown parameter %q (known: region, tls, path-style, virtual-host, direct-fetch, ca-file)", k)}
		}
		b, err := parseBool(v)
		if err != nil {
			return spec, usageError{fmt.Sprintf("the bucket URL's %s=%q: %v", k, v, err)}
		}
		*flag = b
	}
	if s.pathStyle && s.virtualHost {
		return spec, usageError{"the bucket URL sets both path-style and virtual-host"}
	}
	spec.s3, spec.url = s, s.id()
	return spec, nil
}

func parseBool(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "1", "true", "yes", "on", "":
		return true, nil
	case "0", "false", "no", "off":
		return false, nil
	}
	return false, errors.New("want 1 or 0")
}

// s3SpecFromConfig returns the spec of a [remote.NAME] table with kind =
// "s3" and endpoint/bucket keys.
func s3SpecFromConfig(c s3Config) (remoteSpec, error) {
	s := s3Spec{bucket: c.Bucket, prefix: c.Prefix, region: c.Region, accessKey: c.AccessKey, caFile: c.CAFile,
		pathStyle: c.PathStyle, virtualHost: c.VirtualHost, directFetch: c.DirectFetch}
	s.endpoint = strings.TrimSuffix(c.Endpoint, "/")
	scheme := ""
	if i := strings.Index(s.endpoint, "://"); i >= 0 {
		scheme, s.endpoint = s.endpoint[:i], s.endpoint[i+3:]
	}
	switch scheme {
	case "":
		if c.TLS != nil {
			s.tls = *c.TLS
		}
	case "http", "https":
		s.tls = scheme == "https"
		if c.TLS != nil && *c.TLS != s.tls {
			return remoteSpec{}, usageError{fmt.Sprintf("the bucket's endpoint is %s:// but tls = %v", scheme, *c.TLS)}
		}
	default:
		return remoteSpec{}, usageError{fmt.Sprintf("the bucket's endpoint %q: want host:port or http(s)://host:port", c.Endpoint)}
	}
	if s.endpoint == "" || strings.ContainsAny(s.endpoint, "/?#@") {
		return remoteSpec{}, usageError{fmt.Sprintf("the bucket's endpoint %q: want host:port or http(s)://host:port", c.Endpoint)}
	}
	return remoteSpec{kind: "s3", s3: s, url: s.id()}, nil
}

// openBucket resolves the secret key of spec and opens its bucket (no
// request is made).
func (e *cliEnv) openBucket(spec remoteSpec, f commonFlags) (*minio.Bucket, error) {
	s := spec.s3
	secret := s.secretKey
	if f.passwordArg != "" || f.passwordFile != "" || secret == "" {
		prompt := ""
		if s.accessKey != "" {
			prompt = "Secret key for " + s.accessKey + " at " + s.endpoint + ": "
		}
		v, err := e.secret(secretSource{what: "secret key", insecureArg: f.passwordArg, file: f.passwordFile,
			envVar: "LIVESYNC_S3_SECRET_KEY", configFile: spec.cfg.SecretKeyFile, prompt: prompt})
		if err != nil {
			return nil, err
		}
		if v != "" {
			secret = v
		}
	}
	switch {
	case s.accessKey != "" && secret == "":
		return nil, usageError{"no secret key for the access key " + s.accessKey + ": set LIVESYNC_S3_SECRET_KEY, use --password-file or the remote's secret_key_file, or run on a terminal to be asked"}
	case s.accessKey == "" && secret != "":
		return nil, usageError{"a secret key but no access key: name it in the URL (s3://ACCESS_KEY@host:port/bucket/) or as access_key in the configuration"}
	}
	var ca []byte
	if s.caFile != "" {
		var err error
		if ca, err = os.ReadFile(s.caFile); err != nil {
			return nil, usageError{fmt.Sprintf("reading the CA file: %v", err)}
		}
	}
	b, err := minio.New(minio.Config{Endpoint: s.endpoint, Secure: s.tls, Bucket: s.bucket, Prefix: s.prefix,
		AccessKey: s.accessKey, SecretKey: secret, Region: s.region, PathStyle: s.pathStyle, VirtualHost: s.virtualHost,
		CACertPEM: ca})
	if err != nil {
		return nil, bucketConfigError(err)
	}
	return b, nil
}

// bucketRemote is an S3 journal bucket holding a LiveSync vault, synced
// through engine/journalsync.
type bucketRemote struct {
	id      string
	bucket  string        // the bucket's name, for messages
	b       *minio.Bucket // nil in tests that use a journal over fake objects
	j       *journalsync.Journal
	codec   *livesync.Codec
	cipher  journal.Cipher // nil: plain packs
	direct  bool           // chunks may be fetched by id (direct_fetch)
	checked bool           // the passphrase opened a pack

	mu      sync.Mutex
	run     replicateOptions                 // the options of the run in progress
	lastKey map[journalsync.Direction]string // the newest pack of the run, by direction
}

var _ remote = (*bucketRemote)(nil)

// connectBucket connects to a journal bucket: the vault's preferred
// settings from its milestone object, the passphrase, the handshake (salt
// and milestone verdict; the salt is created on a new bucket), and the
// journal over the local replica.
func (e *cliEnv) connectBucket(spec remoteSpec, r *replica, o connectOptions) (_ remote, err error) {
	ctx := e.ctx
	id := spec.String()
	fail := func(err error) (remote, error) {
		var ue usageError
		if errors.As(err, &ue) {
			return nil, err
		}
		return nil, &remoteError{remote: id, err: err, bucket: spec.s3.bucket}
	}
	b, err := e.openBucket(spec, o.flags)
	if err != nil {
		return nil, err
	}
	var pref negotiate.TweakValues
	hasPref := false
	switch raw, err := b.GetMilestone(ctx); {
	case err == nil:
		m, perr := negotiate.ParseMilestone(raw)
		if perr != nil {
			return fail(perr)
		}
		pref, hasPref = m.TweakValues[negotiate.PreferredNode]
	case errors.Is(err, minio.ErrNoBucket) || !errors.Is(err, engine.ErrNotFound):
		return fail(err)
	}
	explicit := spec.cfg.vaultConfig.merge(o.newVault)
	tv, settings, err := vaultSettings(r, pref, hasPref, explicit, true)
	if err != nil {
		return fail(err)
	}
	if needsPassphrase(settings) {
		if settings.Passphrase, err = e.passphraseFor(&spec, o.flags); err != nil {
			return nil, err
		}
		if r.vault != nil {
			if err := checkLocalPassphrase(ctx, r, settings); err != nil {
				return nil, err
			}
		}
	}
	node, err := r.nodeID(ctx)
	if err != nil {
		return nil, err
	}
	hs := minio.HandshakeOptions{NodeID: node, Device: deviceInfoFor(o.deviceName, r, spec), Settings: tv, Check: o.check}
	// First without writing anything: the salt, the verdict, and the
	// passphrase proven on the newest packs. Only then does this device
	// register (or join), so a refused or failed attempt leaves no trace
	// in the bucket.
	probe := hs
	probe.ReadOnly = true
	first, err := b.HandshakeParams(ctx, probe)
	if err != nil {
		return fail(err)
	}
	open := func(salt []byte, params negotiate.SyncParameters) (*bucketRemote, error) {
		codec, err := livesync.New(livesync.Config{Settings: settings, Salt: salt})
		if err != nil {
			return nil, err
		}
		var cipher journal.Cipher
		if settings.Encrypt {
			cipher = journalCipher(settings, salt)
		}
		br, err := newBucketRemote(id, b.Name(), journalsync.Config{Local: r.st, Remote: b, Cipher: cipher,
			Epoch: negotiate.JournalEpoch(params), DirectFetch: spec.s3.directFetch, Log: e.logger(o.flags)})
		if err != nil {
			return nil, err
		}
		br.b, br.codec = b, codec
		return br, nil
	}
	var br *bucketRemote
	if first.Salt != nil || !needsPassphrase(settings) {
		if br, err = open(first.Salt, first.Params); err != nil {
			return fail(err)
		}
		if err := br.checkPassphrase(ctx); err != nil {
			return fail(err)
		}
	}
	switch {
	case o.readOnly && br == nil:
		return fail(errNoVaultYet)
	case !o.readOnly:
		if hs.AllowJoin, err = e.admit(r, spec, o.flags, first.Milestone, first.Verdict); err != nil {
			return fail(err)
		}
		res, err := b.HandshakeParams(ctx, hs)
		if err != nil {
			return fail(err)
		}
		if first.Salt != nil && !bytes.Equal(first.Salt, res.Salt) {
			return fail(errRekeyedMeanwhile)
		}
		if br == nil || first.Salt == nil {
			if br, err = open(res.Salt, res.Params); err != nil {
				return fail(err)
			}
		}
	}
	if err := r.setVault(ctx, tv); err != nil {
		return nil, err
	}
	if st := r.remote(id); st.JournalID != b.ID() || st.JournalPrefix != b.Prefix() {
		st.JournalID, st.JournalPrefix = b.ID(), b.Prefix()
		if err := r.save(ctx); err != nil {
			return nil, err
		}
	}
	return br, nil
}

// newBucketRemote opens the journal of cfg (Remote and Local set) as a
// remote named id; the remote is the journal's Holder and Progress, and
// passes both to the run in progress.
func newBucketRemote(id, bucket string, cfg journalsync.Config) (*bucketRemote, error) {
	br := &bucketRemote{id: id, bucket: bucket, cipher: cfg.Cipher, direct: cfg.DirectFetch, lastKey: map[journalsync.Direction]string{}}
	cfg.Holder, cfg.Progress = br, br.progress
	j, err := journalsync.New(cfg)
	if err != nil {
		return nil, err
	}
	br.j = j
	return br, nil
}

// journalCipher is the whole-pack cipher of an encrypted vault: E2EE with
// the passphrase and the bucket's salt, in the vault's algorithm.
func journalCipher(s livesync.Settings, salt []byte) journal.Cipher {
	alg := e2ee.AlgV2
	switch s.E2EEAlgorithm {
	case livesync.E2EEV1:
		alg = e2ee.AlgV1
	case livesync.E2EEForceV1:
		alg = e2ee.AlgForceV1
	}
	return e2ee.New(s.Passphrase, salt, e2ee.Options{Algorithm: alg, DynamicIterationCount: s.DynamicIterationCount})
}

func (b *bucketRemote) Milestone(ctx context.Context) (*negotiate.Milestone, error) {
	return b.b.ReadMilestone(ctx)
}

func (b *bucketRemote) UpdateMilestone(ctx context.Context, me string, fn func(*negotiate.Milestone, bool) (bool, error)) (*negotiate.Milestone, error) {
	return b.b.UpdateMilestone(ctx, me, time.Now(), fn)
}

func (b *bucketRemote) ChunkRange() negotiate.ChunkRange { return negotiate.JournalChunkRange }

// Reset deletes every object under the bucket's prefix.
func (b *bucketRemote) Reset(ctx context.Context) error {
	_, err := b.b.Reset(ctx)
	return err
}

// ForgetCheckpoint resets the journal's checkpoint in the replica: after
// the bucket was emptied, upstream's wipe detection alone would keep the
// replica's position in its own changes and send nothing again.
func (b *bucketRemote) ForgetCheckpoint(ctx context.Context) error {
	return b.wrap(b.j.ResetCheckpoint(ctx))
}

func (b *bucketRemote) wrapErr(err error) error { return b.wrap(err) }

func (b *bucketRemote) ID() string             { return b.id }
func (b *bucketRemote) Codec() *livesync.Codec { return b.codec }
func (b *bucketRemote) Close() error           { return nil }

// Chunks is the journal's chunk source (fetch by id through the pack
// index) when direct_fetch is on; nil otherwise, as upstream treats a
// journal as a sequential replicator (FORMAT.md §6.6).
func (b *bucketRemote) Chunks() engine.ChunkSource {
	if !b.direct {
		return nil
	}
	return b.j.ChunkSource()
}

// Hold passes a received metadata revision to the holder of the run in
// progress (the journal's Config.Holder).
func (b *bucketRemote) Hold(ctx context.Context, r hold.Revision, source string) (hold.Outcome, error) {
	b.mu.Lock()
	h := b.run.holder
	b.mu.Unlock()
	if h == nil {
		return hold.Held, nil
	}
	return h.Hold(ctx, r, b.id)
}

// progress is the journal's Config.Progress.
func (b *bucketRemote) progress(p journalsync.Progress) {
	b.mu.Lock()
	b.lastKey[p.Direction] = p.Key
	f := b.run.packs
	b.mu.Unlock()
	if f != nil {
		f(p)
	}
}

// wrap names the remote in its errors.
func (b *bucketRemote) wrap(err error) error {
	var le *localError
	var re *remoteError
	if err == nil || errors.As(err, &le) || errors.As(err, &re) || errors.Is(err, context.Canceled) {
		return err
	}
	return &remoteError{remote: b.id, err: err, bucket: b.bucket}
}

// Replicate receives (pull), sends (push) or both (sync: receive first,
// send only if receiving succeeded). Live, it polls every o.interval
// until ctx ends. local and localID are the replica the journal was
// opened on; its checkpoint lives there.
func (b *bucketRemote) Replicate(ctx context.Context, local store.Store, localID string, dir replicate.Direction, o replicateOptions) (syncResult, error) {
	b.mu.Lock()
	b.run = o
	clear(b.lastKey)
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.run = replicateOptions{}
		b.mu.Unlock()
	}()
	if o.retryQuarantined && dir&replicate.Pull != 0 {
		if err := b.j.ClearQuarantine(ctx); err != nil {
			return syncResult{}, b.wrap(err)
		}
	}
	if dir == replicate.Push {
		// A receive finds a wrong passphrase by itself (no pack opens);
		// a push alone would upload packs no other device can open.
		if err := b.checkPassphrase(ctx); err != nil {
			return syncResult{}, b.wrap(err)
		}
	}
	if o.live {
		return syncResult{}, b.watch(ctx, dir, o)
	}
	res, err := b.once(ctx, dir)
	if err == nil && res.PacksReceived > 0 {
		b.checked = true // the passphrase opened a pack
	}
	out := b.result(dir, res)
	if err != nil {
		return out, b.wrap(err)
	}
	if out.quarantined, err = b.j.Quarantined(ctx); err != nil {
		return out, b.wrap(err)
	}
	return out, nil
}

// once runs one receive, send or sync.
func (b *bucketRemote) once(ctx context.Context, dir replicate.Direction) (journalsync.Result, error) {
	switch dir {
	case replicate.Pull:
		return b.j.Receive(ctx)
	case replicate.Push:
		return b.j.Send(ctx)
	}
	return b.j.Sync(ctx)
}

// result maps a journal run onto the replicator's counts: records
// received or sent count as documents, as chunks do on CouchDB.
func (b *bucketRemote) result(dir replicate.Direction, res journalsync.Result) syncResult {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := syncResult{journal: &res}
	if dir&replicate.Pull != 0 {
		n := res.DocsWritten + res.ChunksReceived
		last := b.lastKey[journalsync.Receiving]
		for _, q := range res.Quarantined {
			if q.Key == last {
				last = "" // not received: the replica keeps naming the last pack it applied
			}
		}
		out.Pull = replicate.Progress{Direction: replicate.Pull, DocsRead: n, DocsWritten: n, LastSeq: last}
	}
	if dir&replicate.Push != 0 {
		out.Push = replicate.Progress{Direction: replicate.Push, DocsRead: res.RecordsSent, DocsWritten: res.RecordsSent, LastSeq: b.lastKey[journalsync.Sending]}
	}
	return out
}

// watch polls the bucket every o.interval until ctx ends. A transport
// failure doubles the pause (up to maxPollBackoff) and is retried; any
// other failure ends the watch. Packs quarantined on the way are
// reported through o.warn.
func (b *bucketRemote) watch(ctx context.Context, dir replicate.Direction, o replicateOptions) error {
	interval := o.interval
	if interval <= 0 {
		interval = defaultPollInterval
	}
	failures := 0
	for {
		res, err := b.once(ctx, dir)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		wait := interval
		switch {
		case err == nil:
			failures = 0
			if o.polled != nil {
				o.polled(res)
			}
			for _, q := range res.Quarantined {
				if o.warn != nil {
					o.warn(q)
				}
			}
		case replicate.IsTransport(err):
			failures++
			wait = pollBackoff(interval, failures)
			if o.retrying != nil {
				o.retrying(b.wrap(err), wait)
			}
		default:
			return b.wrap(err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// pollBackoff is the pause after the n-th failure in a row: the interval
// doubled n times, at most maxPollBackoff (and never less than the
// interval).
func pollBackoff(interval time.Duration, n int) time.Duration {
	d := interval
	for range n {
		if d >= maxPollBackoff {
			break
		}
		d *= 2
	}
	return max(min(d, maxPollBackoff), interval)
}

// checkPassphrase opens one of the newest packs (up to three, in case
// one is damaged) with the cipher: a wrong passphrase opens none. Packs
// that fail for another reason say nothing either way.
func (b *bucketRemote) checkPassphrase(ctx context.Context) error {
	if b.cipher == nil || b.checked {
		return nil
	}
	keys, err := b.b.List(ctx, "")
	if err != nil {
		return err
	}
	const probes = 3
	failed := ""
	for i := len(keys) - 1; i >= 0 && i >= len(keys)-probes; i-- {
		_, err := b.b.GetPack(ctx, keys[i], b.cipher)
		switch {
		case err == nil:
			b.checked = true
			return nil
		case errors.Is(err, engine.ErrDecrypt):
			failed = keys[i]
		case errors.Is(err, engine.ErrNotFound):
		default:
			var ee *engine.Error
			if errors.As(err, &ee) && (ee.Stage == engine.StageTransport || ee.Stage == engine.StageAuth) {
				return err
			}
		}
	}
	if failed != "" {
		return &passphraseError{remote: b.id, docID: failed, what: "pack"}
	}
	return nil
}

// Files reads every pack of the bucket and decodes the file metadata
// records, keeping each document's newest revision.
func (b *bucketRemote) Files(ctx context.Context) ([]livesync.Meta, error) {
	keys, err := b.b.List(ctx, "")
	if err != nil {
		return nil, b.wrap(err)
	}
	newest := map[string]livesync.Meta{}
	for _, k := range keys {
		recs, err := b.b.GetPack(ctx, k, b.cipher)
		if err != nil {
			var ee *engine.Error
			if errors.As(err, &ee) && (ee.Stage == engine.StageDecrypt || ee.Stage == engine.StageDecode) {
				continue // a damaged pack; pull reports it
			}
			return nil, b.wrap(err)
		}
		for _, r := range recs {
			if r.IsChunk() {
				continue
			}
			d, err := livesync.ParseDoc(r.Doc)
			if err != nil || !d.IsFileDoc() {
				continue
			}
			m, err := livesync.ParseMeta(d)
			if err != nil {
				continue
			}
			if old, ok := newest[m.ID]; !ok || purgatory.CompareRevs(m.Rev, old.Rev) > 0 {
				newest[m.ID] = m
			}
		}
	}
	out := make([]livesync.Meta, 0, len(newest))
	for _, m := range newest {
		out = append(out, m)
	}
	return out, nil
}

// offlineJournal names a journal bucket without reaching it: enough of
// journalsync.Objects to read the journal's checkpoint in the local
// replica (its quarantine) for status and doctor.
type offlineJournal struct{ id, prefix string }

var errOffline = errors.New("the bucket is not contacted")

func (o offlineJournal) List(context.Context, string) ([]string, error) { return nil, errOffline }
func (o offlineJournal) Get(context.Context, string) ([]byte, error)    { return nil, errOffline }
func (o offlineJournal) Put(context.Context, string, []byte) error      { return errOffline }
func (o offlineJournal) Prefix() string                                 { return o.prefix }
func (o offlineJournal) ID() string                                     { return o.id }

// quarantinedPacks returns the packs the replica's checkpoint of a
// journal holds in quarantine (none if the remote is not a journal).
func quarantinedPacks(ctx context.Context, st store.Store, s *remoteState) ([]journalsync.Quarantine, error) {
	if s == nil {
		return nil, nil
	}
	return journalQuarantine(ctx, st, s.JournalID, s.JournalPrefix)
}

// journalQuarantine returns the packs the replica's checkpoint of the
// journal journalID holds in quarantine (none for "").
func journalQuarantine(ctx context.Context, st store.Store, journalID, prefix string) ([]journalsync.Quarantine, error) {
	if journalID == "" {
		return nil, nil
	}
	j, err := journalsync.New(journalsync.Config{Local: st, Remote: offlineJournal{id: journalID, prefix: prefix}})
	if err != nil {
		return nil, err
	}
	return j.Quarantined(ctx)
}
