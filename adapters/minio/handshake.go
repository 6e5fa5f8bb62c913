package minio

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/negotiate"
)

// HandshakeOptions configure Handshake: negotiate.HandshakeOptions without
// the chunk range, which is always negotiate.JournalChunkRange, and
// without CreateIfMissing: the adapter never creates buckets.
type HandshakeOptions struct {
	// NodeID is this device's node id (negotiate.NodeInfoDoc's nodeid).
	NodeID string
	// Device describes this device in the milestone's node_info. Upstream
	// puts the newest journal pack this device received in Progress; it
	// may be empty.
	Device negotiate.DeviceInfo
	// Settings are this device's tweak values (livesync.Settings.TweakValues).
	Settings negotiate.TweakValues
	// AllowJoin lets this node add itself to a locked bucket's
	// accepted_nodes (upstream's markRemoteResolved): set it only after
	// the user has chosen to fetch the rebuilt remote.
	AllowJoin bool
	// ReadOnly writes nothing: no salt and no milestone entry. A bucket
	// without a salt gives a nil Salt (and empty Params and Epoch). See
	// negotiate.HandshakeOptions.ReadOnly.
	ReadOnly bool
	// Check relaxes the milestone checks (upstream's ignoreVersionCheck,
	// disableCheckingConfigMismatch).
	Check negotiate.CheckOptions
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (o HandshakeOptions) negotiate() negotiate.HandshakeOptions {
	return negotiate.HandshakeOptions{NodeID: o.NodeID, Range: negotiate.JournalChunkRange, Device: o.Device,
		Settings: o.Settings, AllowJoin: o.AllowJoin, ReadOnly: o.ReadOnly, Check: o.Check, Now: o.Now}
}

// Handshake is the pre-sync handshake of a journal bucket
// (negotiate.Handshake over Negotiate; commonlib
// LiveSyncJournalReplicator.ts): it returns the vault's PBKDF2 salt and
// the milestone verdict, or an error that says what to do. A failed read
// of the sync parameters (wrong credentials, network, a missing bucket, a
// malformed object) is returned and writes nothing; a missing bucket
// wraps ErrNoBucket and names it. There is no version document on a
// bucket. The verdict is valid when err is nil or wraps a refusing
// verdict.
func (b *Bucket) Handshake(ctx context.Context, o HandshakeOptions) (salt []byte, verdict negotiate.Verdict, err error) {
	r, err := b.HandshakeParams(ctx, o)
	return r.Salt, r.Verdict, err
}

// HandshakeResult is what HandshakeParams learnt from the bucket.
type HandshakeResult struct {
	// Salt is the vault's PBKDF2 salt (Params.PBKDF2Salt decoded): with
	// the passphrase it keys the E2EE cipher (journalsync.CipherFor).
	Salt []byte
	// Params is the sync-parameters object as stored, which is another
	// client's when it created the salt first.
	Params negotiate.SyncParameters
	// Epoch is negotiate.JournalEpoch(Params),
	// "<protocolVersion>:<pbkdf2salt>": journalsync.Config.Epoch.
	Epoch string
	// Milestone is the milestone as read before this handshake changed
	// it; nil when the bucket had none.
	Milestone *negotiate.Milestone
	// Verdict is the milestone verdict, valid when the error is nil or
	// wraps a refusing verdict.
	Verdict negotiate.Verdict
}

// HandshakeParams runs Handshake and returns, besides the salt and the
// verdict, the sync parameters it read (or wrote) and the journal epoch,
// so a caller needs no further request to fill journalsync.Config. Salt,
// Params and Epoch are set whenever the sync parameters were read, also
// when the milestone step fails.
func (b *Bucket) HandshakeParams(ctx context.Context, o HandshakeOptions) (HandshakeResult, error) {
	r, err := negotiate.Handshake(ctx, b.Negotiate(), o.negotiate())
	out := HandshakeResult{Salt: r.Salt, Milestone: r.Milestone, Verdict: r.Verdict}
	if r.Salt != nil {
		out.Params, out.Epoch = r.Params, negotiate.JournalEpoch(r.Params)
	}
	return out, err
}

// ReadMilestone reads the milestone object; nil (and no error) when the
// bucket has none.
func (b *Bucket) ReadMilestone(ctx context.Context) (*negotiate.Milestone, error) {
	return negotiate.ReadMilestone(ctx, b.Negotiate())
}

// UpdateMilestone is negotiate.UpdateMilestone on this bucket: the
// milestone object is uploaded conditionally on the ETag read (or on its
// absence).
func (b *Bucket) UpdateMilestone(ctx context.Context, me string, now time.Time, fn func(m *negotiate.Milestone, found bool) (write bool, err error)) (*negotiate.Milestone, error) {
	return negotiate.UpdateMilestone(ctx, b.Negotiate(), me, now, fn)
}

// Negotiate returns the bucket's side of the handshake: the sync
// parameters and the milestone are objects under the prefix, with their
// ETags as version tokens. A bucket has no version document (reading it
// answers not-found, writing it does nothing) and reports no progress.
// The adapter never creates buckets: Exists reports true without a
// request, and reading a record of a missing bucket fails with an error
// wrapping ErrNoBucket and negotiate.ErrNoDatabase.
func (b *Bucket) Negotiate() negotiate.Port { return bucketPort{b} }

type bucketPort struct{ b *Bucket }

var _ negotiate.Port = bucketPort{}

func (p bucketPort) Exists(context.Context) (bool, error) { return true, nil }

func (p bucketPort) Create(context.Context) error { return nil }

func (p bucketPort) Progress(context.Context) (string, error) { return "", nil }

// key returns the object key of a record, "" for the version document.
func (p bucketPort) key(r negotiate.Record) string {
	switch r {
	case negotiate.RecordSyncParameters:
		return p.b.prefix + negotiate.JournalSyncParametersKey
	case negotiate.RecordMilestone:
		return p.b.prefix + negotiate.JournalMilestoneKey
	}
	return ""
}

func (p bucketPort) Read(ctx context.Context, r negotiate.Record) (json.RawMessage, string, error) {
	key := p.key(r)
	if key == "" {
		return nil, "", &engine.Error{Op: "read " + string(r), DocID: string(r), Stage: engine.StageStorage,
			Err: fmt.Errorf("minio: a bucket keeps no %s: %w", r, engine.ErrNotFound)}
	}
	raw, etag, err := p.b.getObject(ctx, "read "+r.Name(), key)
	if errors.Is(err, ErrNoBucket) {
		err = &noDatabase{err}
	}
	return raw, etag, err
}

func (p bucketPort) Write(ctx context.Context, r negotiate.Record, raw json.RawMessage, version string) (string, error) {
	key := p.key(r)
	if key == "" {
		return "", nil
	}
	cond := put{ifAbsent: true}
	if version != "" {
		cond = put{ifMatch: version}
	}
	etag, err := p.b.putObject(ctx, "write "+r.Name(), key, raw, "application/json", cond)
	if errors.Is(err, errPrecondition) {
		return "", fmt.Errorf("%w: %w", negotiate.ErrConflict, err)
	}
	return etag, err
}

// noDatabase marks a missing bucket for negotiate: not proof that a
// record is absent.
type noDatabase struct{ error }

func (e *noDatabase) Unwrap() []error { return []error{e.error, negotiate.ErrNoDatabase} }
