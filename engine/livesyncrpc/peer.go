package livesyncrpc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/rpcroom"
)

// DBSuffix follows the vault name in the plugin's local database name.
const DBSuffix = "-livesync-v2"

// DBName returns the database name a vault's peer reports in db.info.
func DBName(vault string) string { return vault + DBSuffix }

// Method names: the database methods the plugin's hosting database
// serves and the replicator's commands (commonlib
// src/replication/trystero/rpcCompat.ts toRpcMethodName).
const (
	MethodInfo                   = "db.info"
	MethodChanges                = "db.changes"
	MethodRevsDiff               = "db.revsDiff"
	MethodBulkGet                = "db.bulkGet"
	MethodBulkDocs               = "db.bulkDocs"
	MethodGet                    = "db.get"
	MethodPut                    = "db.put"
	MethodReqAuth                = "legacy/!reqAuth"
	MethodGetTweakSettings       = "legacy/getTweakSettings"
	MethodReqSync                = "legacy/reqSync"
	MethodOnProgress             = "legacy/onProgress"
	MethodOnProgressAcknowledged = "legacy/onProgressAcknowledged"
	MethodGetIsBroadcasting      = "legacy/getIsBroadcasting"
	MethodRequestBroadcasting    = "legacy/requestBroadcasting"
)

// Config configures a Peer.
type Config struct {
	// SelfID is this peer's Trystero selfId: the id it advertises and
	// passes as the caller id of the legacy/ methods. Required.
	SelfID string
	// DB is the database served and pulled into: the vault's plaintext
	// local replica (documents in the plugin's local form), for example
	// a store.Store. Required. If it also has the Get, Put and PutBatch
	// methods of store.Store, db.get, db.put and db.bulkDocs serve
	// ordinary documents too; _local documents need only the Endpoint.
	DB engine.Endpoint
	// DBName is the name reported by db.info and used in checkpoint ids,
	// DBName(vault) as the plugin names its database. Required.
	DBName string
	// DeviceName is the advertised name; Platform the advertised
	// platform, Platform ("server") by default.
	DeviceName string
	Platform   string
	// Tweaks holds the vault's must-match tweak values and Passphrase its
	// E2EE passphrase ("" for none): legacy/getTweakSettings answers
	// them, the passphrase only as a three-minute hash.
	Tweaks     negotiate.TweakValues
	Passphrase string
	// AutoAccept and AutoDeny are pattern lists (see ParsePatterns).
	AutoAccept string
	AutoDeny   string
	// Decisions stores lasting decisions by device name; nil keeps none.
	Decisions Decisions
	// Ask is asked about a peer no earlier decision or pattern covers;
	// nil makes the peer headless: such peers are refused.
	Ask func(ctx context.Context, ad Advertisement) (Decision, error)
	// Follow lists the peers (patterns of device names) whose
	// legacy/onProgress makes this peer pull from them, as the plugin's
	// watched peers.
	Follow string
	// Broadcasting is what legacy/getIsBroadcasting answers while
	// Broadcast is not running (it answers true while it runs).
	Broadcasting bool
	// OnProgress, if set, is told about replication progress: this
	// peer's pulls (Sending false) and the peers' acknowledgements of
	// pulls from this peer (Sending true). It must not block.
	OnProgress func(Progress)
	// Now defaults to time.Now.
	Now func() time.Time
}

// Progress reports one step of a replication with Peer. Info is nil when
// the replication ended.
type Progress struct {
	Peer    string
	Sending bool
	Info    *ProgressInfo
}

// ProgressInfo is ReplicatorShim's progress: the numeric part of the
// last sequence replicated and of the source's update sequence.
type ProgressInfo struct {
	LastSeq       int64 `json:"lastSeq"`
	MaxSeqInBatch int64 `json:"maxSeqInBatch"`
}

// Peer is LiveSync's P2P replicator over an rpcroom.Room, server and
// client: it serves Config.DB to accepted peers and pulls from them.
type Peer struct {
	cfg          Config
	accept, deny Patterns
	follow       Patterns
	access       access
	local        *localDocs
	room         *rpcroom.Room
	pullMu       sync.Mutex
	pulling      map[string]bool
	progressMu   sync.Mutex
	followers    map[string]*follower
	broadcasting atomic.Bool
	notifyMu     sync.Mutex
	notifiers    map[string]*notifier
	ctx          context.Context // ends at Close
	cancel       context.CancelFunc
	wg           sync.WaitGroup
}

// Errors of a pull.
var (
	// ErrRejected means the peer did not accept this one
	// (legacy/!reqAuth did not answer true).
	ErrRejected = errors.New("livesyncrpc: peer rejected the connection")
	// ErrPassphraseMismatch means the peer's passphrase hash differs: its
	// chunks would have other ids, so nothing is replicated.
	ErrPassphraseMismatch = errors.New("livesyncrpc: the peer's passphrase does not match this vault's; replication cancelled")
	// ErrUnknownPeer means no advertisement of the peer is known.
	ErrUnknownPeer = errors.New("livesyncrpc: peer is not known (no advertisement)")
	// ErrInProgress means a pull from the peer is already running.
	ErrInProgress = errors.New("livesyncrpc: replication from this peer is already in progress")
	// ErrNotServing means Serve has not been called.
	ErrNotServing = errors.New("livesyncrpc: peer is not attached to a room")
)

// New checks cfg and returns a Peer. Pass its CanAccept to the Room's
// Config, then call Serve with the Room.
func New(cfg Config) (*Peer, error) {
	if cfg.SelfID == "" || cfg.DB == nil || cfg.DBName == "" {
		return nil, errors.New("livesyncrpc: Config needs SelfID, DB and DBName")
	}
	if cfg.Platform == "" {
		cfg.Platform = Platform
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	p := &Peer{cfg: cfg, local: &localDocs{db: cfg.DB}, pulling: map[string]bool{},
		followers: map[string]*follower{}, notifiers: map[string]*notifier{}}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.broadcasting.Store(cfg.Broadcasting)
	p.access.ads = map[string]Advertisement{}
	p.access.session = map[string]bool{}
	var err error
	if p.accept, err = ParsePatterns(cfg.AutoAccept); err != nil {
		return nil, err
	}
	if p.deny, err = ParsePatterns(cfg.AutoDeny); err != nil {
		return nil, err
	}
	if p.follow, err = ParsePatterns(cfg.Follow); err != nil {
		return nil, err
	}
	return p, nil
}

// Serve registers the database methods and the legacy/ commands on room
// and uses room for pulls. Call it once, before the room receives
// requests.
func (p *Peer) Serve(room *rpcroom.Room) error {
	if p.room != nil {
		return fmt.Errorf("livesyncrpc: Serve called twice")
	}
	p.room = room
	handlers := map[string]rpcroom.HandlerFunc{
		MethodInfo: p.handleInfo, MethodChanges: p.handleChanges, MethodRevsDiff: p.handleRevsDiff,
		MethodBulkGet: p.handleBulkGet, MethodBulkDocs: p.handleBulkDocs, MethodGet: p.handleGet,
		MethodPut: p.handlePut, MethodReqAuth: p.handleReqAuth, MethodGetTweakSettings: p.handleTweaks,
		MethodReqSync: p.handleReqSync, MethodOnProgress: p.handleOnProgress,
		MethodOnProgressAcknowledged: p.handleAck, MethodGetIsBroadcasting: p.handleIsBroadcasting,
		MethodRequestBroadcasting: p.handleRequestBroadcasting,
	}
	for m, h := range handlers {
		if err := room.Handle(m, h); err != nil {
			return err
		}
	}
	return nil
}

func (p *Peer) progress(pr Progress) {
	if p.cfg.OnProgress != nil {
		p.cfg.OnProgress(pr)
	}
}
