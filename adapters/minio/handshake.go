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

// HandshakeOptions configure Handshake.
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
	// without a salt gives a nil Salt (and empty Params and Epoch). The
	// verdict is the one this node would get if it registered now, and
	// the lock verdicts (VerdictNodeLocked, VerdictNodeCleaned) are not
	// errors: the lock guards against merging stale local data into the
	// bucket, not against reading it. Use it for commands that only read,
	// and to prove the passphrase before a writing handshake.
	ReadOnly bool
	// Check relaxes the milestone checks (upstream's ignoreVersionCheck,
	// disableCheckingConfigMismatch).
	Check negotiate.CheckOptions
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// milestoneTries bounds the read-register-write rounds of Handshake when
// other clients rewrite the milestone at the same time. Every round that
// loses does so because another client won one, so n racing clients all
// finish within n rounds.
const milestoneTries = 16

// Handshake is the pre-sync handshake of a journal bucket (FORMAT.md §6.5
// "Pre-sync checks mirror CouchDB", §5.4; commonlib
// LiveSyncJournalReplicator.ts): it returns the vault's PBKDF2 salt and
// the milestone verdict, or an error that says what to do.
//
//  1. Sync parameters (EnsureSyncParameters): the salt is created only
//     when the object is proven absent (NoSuchKey) or salt-less; a failed
//     read (wrong credentials, network, a missing bucket, a malformed
//     object) is returned and writes nothing. A missing bucket wraps
//     ErrNoBucket and names it: create it on the server.
//  2. The milestone object (there is no version document on a bucket):
//     read, registered (negotiate.Milestone.Register with
//     negotiate.JournalChunkRange) and written back when needed, with a
//     conditional PutObject on the ETag that was read; when another
//     client wrote it in between, the round starts again from the read
//     (ErrMilestoneRace after milestoneTries rounds). Then judged by
//     negotiate.Check. A node that is not accepted by a locked bucket
//     joins accepted_nodes only with AllowJoin. Verdicts that refuse sync
//     are returned as errors wrapping negotiate's (ErrNodeLocked,
//     ErrNodeCleaned, ErrIncompatible, *negotiate.TweakMismatchError).
//
// The verdict is valid when err is nil or wraps a refusing verdict.
// HandshakeParams is the same handshake that also returns the sync
// parameters and the journal epoch.
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
	var r HandshakeResult
	if o.NodeID == "" {
		return r, errors.New("minio: handshake: a node id is required")
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}

	// 1. Sync parameters and the salt.
	var p negotiate.SyncParameters
	var err error
	if o.ReadOnly {
		doc, _, rerr := b.readSyncParams(ctx)
		if errors.Is(rerr, ErrNoBucket) {
			return r, rerr
		}
		need, err := negotiate.NeedsNewSalt(doc, rerr)
		if err != nil {
			return r, fmt.Errorf("minio: the sync parameters could not be read: %w", err)
		}
		if need {
			r.Milestone, r.Verdict, err = b.milestone(ctx, o, now())
			return r, err
		}
		p = *doc
	} else if p, err = b.EnsureSyncParameters(ctx); err != nil {
		return r, err
	}
	salt, err := p.Salt()
	if err != nil {
		return r, &engine.Error{Op: "read sync parameters", DocID: b.prefix + negotiate.JournalSyncParametersKey, Stage: engine.StageDecode,
			Err: fmt.Errorf("minio: handshake: the bucket's salt is unusable (another client wrote it wrongly; do not overwrite it without rebuilding every device): %w", err)}
	}
	r.Salt, r.Params, r.Epoch = salt, p, negotiate.JournalEpoch(p)

	// 2. The milestone.
	r.Milestone, r.Verdict, err = b.milestone(ctx, o, now())
	return r, err
}

// ReadMilestone reads the milestone object; nil (and no error) when the
// bucket has none.
func (b *Bucket) ReadMilestone(ctx context.Context) (*negotiate.Milestone, error) {
	m, _, err := b.readMilestone(ctx)
	return m, err
}

func (b *Bucket) readMilestone(ctx context.Context) (*negotiate.Milestone, string, error) {
	key := b.prefix + negotiate.JournalMilestoneKey
	raw, etag, err := b.getObject(ctx, "read milestone", key)
	switch {
	case errors.Is(err, engine.ErrNotFound) && !errors.Is(err, ErrNoBucket):
		return nil, "", nil
	case err != nil:
		return nil, "", err
	}
	m, err := negotiate.ParseMilestone(raw)
	if err != nil {
		return nil, "", &engine.Error{Op: "read milestone", DocID: key, Stage: engine.StageDecode, Err: err}
	}
	return m, etag, nil
}

// UpdateMilestone reads the milestone object (a new one for node me,
// created now, when there is none), lets fn change it (found
// says whether it was read), and uploads it if
// fn says so, conditionally on the ETag read (or on its absence): when
// another client wrote it in between, the round starts again from a fresh
// read (ErrMilestoneRace after milestoneTries rounds). fn may run more
// than once and must derive its changes from the milestone it is given.
// It returns the milestone as written (or as read, when fn wrote
// nothing).
func (b *Bucket) UpdateMilestone(ctx context.Context, me string, now time.Time, fn func(m *negotiate.Milestone, found bool) (write bool, err error)) (*negotiate.Milestone, error) {
	key := b.prefix + negotiate.JournalMilestoneKey
	for range milestoneTries {
		m, etag, err := b.readMilestone(ctx)
		if err != nil {
			return nil, err
		}
		cond, found := put{ifMatch: etag}, m != nil
		if !found {
			m = negotiate.NewMilestone(me, now) // _id as upstream writes it (negotiate.MilestoneDocID)
			cond = put{ifAbsent: true}
		}
		write, err := fn(m, found)
		if err != nil || !write {
			return m, err
		}
		body, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		err = b.putObject(ctx, "write milestone", key, body, "application/json", cond)
		if errors.Is(err, errPrecondition) {
			continue // another client wrote it since the read
		}
		if err != nil {
			return nil, err
		}
		return m, nil
	}
	return nil, &engine.Error{Op: "write milestone", DocID: key, Stage: engine.StageStorage, Err: ErrMilestoneRace}
}

// milestone is step 2 of HandshakeParams: it returns the milestone as
// read (nil if absent) and this node's verdict.
func (b *Bucket) milestone(ctx context.Context, o HandshakeOptions, now time.Time) (*negotiate.Milestone, negotiate.Verdict, error) {
	my := negotiate.JournalChunkRange
	var read *negotiate.Milestone
	var v negotiate.Verdict
	judge := func(m *negotiate.Milestone, found bool) (bool, error) {
		read = nil
		if found {
			read = m.Clone()
		}
		var write bool
		write, v = negotiate.Admit(m, negotiate.Admission{Node: o.NodeID, Range: my, Device: o.Device, Settings: o.Settings,
			Check: o.Check, AllowJoin: o.AllowJoin, ReadOnly: o.ReadOnly, Now: now})
		return write, nil
	}
	if _, err := b.UpdateMilestone(ctx, o.NodeID, now, judge); err != nil {
		return read, v, err
	}
	return read, v, verdictErr(v, o.ReadOnly)
}

// verdictErr wraps a refusing verdict with what the user can do.
func verdictErr(v negotiate.Verdict, readOnly bool) error {
	err := v.Err()
	if err == nil || readOnly && (v.Kind == negotiate.VerdictNodeLocked || v.Kind == negotiate.VerdictNodeCleaned) {
		return nil
	}
	switch {
	case errors.Is(err, negotiate.ErrNodeCleaned):
		return fmt.Errorf("minio: handshake: sync refused: %w; fetch everything from the bucket again into an empty local database (which then joins the accepted devices), or unlock the bucket", err)
	case errors.Is(err, negotiate.ErrNodeLocked):
		return fmt.Errorf("minio: handshake: sync refused: %w; fetch the rebuilt bucket into an empty local database (which then joins the accepted devices), or unlock the bucket", err)
	case errors.Is(err, negotiate.ErrTweakMismatch):
		return fmt.Errorf("minio: handshake: sync refused: %w; adopt the bucket's preferred settings, or make this device's settings the preferred ones (other devices must then adopt them)", err)
	case errors.Is(err, negotiate.ErrIncompatible):
		return fmt.Errorf("minio: handshake: sync refused: %w; update every device to a version that supports the bucket's chunk format", err)
	}
	return fmt.Errorf("minio: handshake: sync refused: %w", err)
}
