package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/adapters/minio"
	"github.com/livesync-go/livesync-go/engine"
	ebridge "github.com/livesync-go/livesync-go/engine/bridge"
	"github.com/livesync-go/livesync-go/engine/hunt"
	"github.com/livesync-go/livesync-go/engine/livesync"
)

// The relay's bridging is engine/bridge over a vaultStore: this file
// turns the configuration's upstreams into bridge.Upstream values (the
// CouchDB and bucket adapters, the throttle keys, the messages that name
// configuration keys) and gives the databases, /status and /metrics the
// bridge's snapshot.

// Upstream states, for /status and the upstream_up metric.
const (
	stateConnecting = ebridge.StateConnecting
	stateCatchingUp = ebridge.StateCatchingUp
	stateLive       = ebridge.StateLive
	stateBackoff    = ebridge.StateBackoff
	stateError      = ebridge.StateError
	stateStopped    = ebridge.StateStopped
)

// The /status types are the bridge's snapshot.
type (
	upstreamStatus = ebridge.UpstreamStatus
	huntStatus     = ebridge.HuntStatus
)

// bridgeSetup is what a database needs to bridge its upstreams.
type bridgeSetup struct {
	uuid  string // the relay's server uuid (replication ids)
	specs []upstreamSpec
	hunt  hunt.Config
}

// bridge is a database's engine/bridge, with what the relay's files use
// of it.
type bridge struct {
	*ebridge.Bridge
	hunt    *hunt.Hunt    // the hold-back's Hunter
	ups     []upstreamRef // the upstreams, in configuration order
	closers []func() error
}

// upstreamRef is one upstream of a bridge, for the up metric.
type upstreamRef struct {
	b *ebridge.Bridge
	i int
}

func (r upstreamRef) up() bool { return r.b.Up(r.i) }

// bridgeLocal is a vaultStore as the bridge's Local.
type bridgeLocal struct{ *vaultStore }

func (l bridgeLocal) Codec() (*livesync.Codec, []byte) { return l.currentCodec() }
func (l bridgeLocal) HasPassphrase() bool              { return l.hasPassphrase() }

// newBridge opens the upstreams of v (their adapters) and builds the
// bridge; start runs it.
func newBridge(v *vaultStore, setup bridgeSetup, log *slog.Logger) (*bridge, error) {
	var ups []ebridge.Upstream
	var closers []func() error
	closeAll := func() {
		for _, c := range closers {
			_ = c()
		}
	}
	for _, spec := range setup.specs {
		u, closer, err := openUpstream(spec, log.With("upstream", spec.name))
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("database %q: upstream %q: %w", v.name, spec.name, err)
		}
		if closer != nil {
			closers = append(closers, closer)
		}
		ups = append(ups, u)
	}
	eb, err := ebridge.New(bridgeLocal{v}, ebridge.Config{DB: v.name, UUID: setup.uuid, Upstreams: ups, Hunt: setup.hunt, Log: log})
	if err != nil {
		closeAll()
		return nil, err
	}
	b := &bridge{Bridge: eb, hunt: eb.Hunt()}
	for i := range ups {
		b.ups = append(b.ups, upstreamRef{b: eb, i: i})
	}
	b.closers = closers
	return b, nil
}

// openUpstream builds spec's adapter: a CouchDB database or a bucket.
func openUpstream(spec upstreamSpec, log *slog.Logger) (ebridge.Upstream, func() error, error) {
	u := ebridge.Upstream{Name: spec.name, Kind: spec.kind, Mode: spec.mode, Location: spec.location(),
		Database: spec.couch.Database, ChunksOnline: spec.chunksOnline, DirectFetch: spec.directFetch,
		PollInterval: spec.pollInterval, Explain: func(err error) string { return explainUpstreamErr(spec, err) }}
	switch spec.kind {
	case kindCouchDB:
		r, err := couchdb.NewRemote(spec.couch, couchdb.RemoteOptions{ID: spec.location()})
		if err != nil {
			return u, nil, err
		}
		u.Remote, u.Docs, u.ThrottleKey = r, r.DB(), r.DB().ThrottleKey()
		return u, r.Close, nil
	case kindS3:
		r, err := openBucket(spec.s3, log)
		if err != nil {
			return u, nil, err
		}
		u.Remote, u.ThrottleKey = r, bucketThrottleKey(spec)
		return u, r.Close, nil
	}
	return u, nil, nil
}

func (b *bridge) start() { b.Start() }

// stop cancels the runners and waits for them, then stops the hunt and
// closes the upstreams. It must not be called with the vaultStore's
// lock held.
func (b *bridge) stop() {
	b.Stop()
	b.closeUpstreams()
}

// close stops the hunt of a bridge that was not started.
func (b *bridge) close() {
	b.Close()
	b.closeUpstreams()
}

func (b *bridge) closeUpstreams() {
	for _, c := range b.closers {
		_ = c()
	}
	b.closers = nil
}

func (b *bridge) paramsChanged(ctx context.Context) { b.ParamsChanged(ctx) }
func (b *bridge) settingsChanged()                  { b.SettingsChanged() }

func (b *bridge) snapshot() ([]upstreamStatus, huntStatus) { return b.Snapshot() }
func (b *bridge) sourceName(key string) string             { return b.SourceName(key) }

// explainUpstreamErr says what failed and, where it helps, what to check,
// in the configuration's words. Adapter errors carry no secrets; neither
// does this.
func explainUpstreamErr(spec upstreamSpec, err error) string {
	var ee *engine.Error
	if errors.As(err, &ee) && ee.Stage == engine.StageAuth {
		if spec.kind == kindCouchDB {
			return "authentication failed: check user and the password (password_file or password_env): " + err.Error()
		}
		if keys := s3SettingKeys(err); keys != "" {
			return "authentication failed: " + keys + ": " + err.Error()
		}
		return "authentication failed: check access_key, the secret key (secret_key_file or secret_key_env) and region: " + err.Error()
	}
	if spec.kind == kindCouchDB && (errors.Is(err, engine.ErrNotFound) || errors.Is(err, ebridge.ErrNoUpstreamDatabase)) {
		// Only a missing database fails a session with not-found: an
		// absent document is an answer, never an error, there.
		return fmt.Sprintf("the database %q does not exist on the server %s (or was deleted): create it there "+
			"(the relay never creates an upstream database), or fix database = %q of upstream %q: %v",
			spec.couch.Database, strings.TrimSuffix(spec.couch.URL, "/"), spec.couch.Database, spec.name, err)
	}
	if spec.kind == kindS3 && errors.Is(err, minio.ErrNoBucket) {
		return fmt.Sprintf("the bucket %q does not exist on the server %s: create it there (the relay never creates buckets), "+
			"or fix bucket = %q of upstream %q: %v", spec.s3.Bucket, strings.TrimSuffix(spec.location(), "/"+spec.s3.Bucket+"/"+spec.s3.Prefix),
			spec.s3.Bucket, spec.name, err)
	}
	if spec.kind == kindS3 {
		return withS3SettingKeys(err).Error()
	}
	return err.Error()
}
