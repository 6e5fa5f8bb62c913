//go:build !js

package p2p

// SKELETON (owner: helper B). Signatures are the contract; bodies are
// filled in by the owner before anything calls them.

import (
	"context"
	"log/slog"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/livesync-go/livesync-go/adapters/p2p/discovery"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/replicate"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// PeerBookFileName is the conventional name of the peer book beside a
// replica (or in the relay's data directory).
const PeerBookFileName = "p2p-peers.json"

// PeerEntry is one peer in the book.
type PeerEntry struct {
	ID       peer.ID
	Device   string
	Addrs    []string
	Since    time.Time // approved, or first seen pending
	LastSeen time.Time
}

// PeerBook is the persistent allow-list (approved peers) and the pending
// peers (seen, not approved), kept in a JSON file written 0600.
type PeerBook struct{}

// OpenPeerBook reads (or starts) the book at path; "" keeps it in memory.
func OpenPeerBook(path string) (*PeerBook, error) { panic("skeleton") }

func (b *PeerBook) Allow() *AllowList                       { panic("skeleton") }
func (b *PeerBook) Approve(id peer.ID, device string) error { panic("skeleton") }
func (b *PeerBook) Revoke(id peer.ID) error                 { panic("skeleton") }
func (b *PeerBook) NotePending(id peer.ID, device string, addrs []string, at time.Time) error {
	panic("skeleton")
}
func (b *PeerBook) Approved() []PeerEntry { panic("skeleton") }
func (b *PeerBook) Pending() []PeerEntry  { panic("skeleton") }

// Reload re-reads the file (another process approved or revoked).
func (b *PeerBook) Reload() error { panic("skeleton") }

// GroupConfig configures JoinGroup.
type GroupConfig struct {
	Name        string          // the group id (never sent in clear)
	Room        *discovery.Room // discovery.NewRoom(Name, group passphrase)
	Host        host.Host
	NostrRelays []string // ws:// or wss:// URLs
	Device      string   // this device's name in announcements
	Book        *PeerBook
	Serve       *Served // nil: serve nothing
	// AnnounceInterval is how often this peer re-announces; zero: 30 s.
	// Announcements expire after three intervals.
	AnnounceInterval time.Duration
	Logger           *slog.Logger // nil discards
	Now              func() time.Time
}

// PeerStatus is one peer as the group sees it.
type PeerStatus struct {
	PeerEntry
	Approved  bool
	Connected bool
	Counters  PeerCounters
}

// PeerEventKind says what happened to a peer.
type PeerEventKind int

const (
	PeerFound    PeerEventKind = iota + 1 // an announcement of an approved peer
	PeerLost                              // its announcements expired
	PeerPending                           // an unapproved peer announced or knocked
	PeerApproved                          // the book approved it
	PeerRevoked                           // the book revoked it; its streams were closed
)

// PeerEvent is one change in the group.
type PeerEvent struct {
	Kind PeerEventKind
	Peer PeerStatus
}

// Group is this peer's membership of one sync group.
type Group struct{}

// JoinGroup serves cfg.Serve to approved peers, announces this peer and
// watches the room until Close.
func JoinGroup(ctx context.Context, cfg GroupConfig) (*Group, error) { panic("skeleton") }

func (g *Group) Peers() []PeerStatus                    { panic("skeleton") }
func (g *Group) Watch(fn func(PeerEvent)) (stop func()) { panic("skeleton") }
func (g *Group) Remote(id peer.ID) *Remote              { panic("skeleton") }
func (g *Group) Meter() *Meter                          { panic("skeleton") }
func (g *Group) Close() error                           { panic("skeleton") }

// ServedVault is what a replica serves: its plaintext replica encoded to
// the remote form with the group's salt (read from its records, which the
// first peer's handshake writes) and settings, and its records under a
// per-group prefix.
func ServedVault(v *vault.Vault, group string, settings livesync.Settings) *Served { panic("skeleton") }

// VaultSyncOptions configure SyncVault.
type VaultSyncOptions struct {
	Direction replicate.Direction // 0: both
	Live      bool                // keep syncing with peers as they come and go, until ctx ends
	// Wait is how long a one-shot sync waits for peers to announce; zero: 10 s.
	Wait   time.Duration
	Attach vault.AttachOptions // per peer (passphrase, admit, device)
	// Hunt runs a hunt across the peers after a one-shot sync (and on
	// every peer arrival when Live).
	Hunt bool
	// OnPeer reports each peer's outcome (nil error: synced).
	OnPeer func(id peer.ID, res vault.SyncResult, err error)
}

// VaultSyncResult is what a one-shot SyncVault did.
type VaultSyncResult struct {
	Peers  []peer.ID // the peers synced with
	Failed map[peer.ID]error
	Hunt   vault.HuntResult
}

// SyncVault syncs v with every approved peer of g.
func SyncVault(ctx context.Context, v *vault.Vault, g *Group, o VaultSyncOptions) (VaultSyncResult, error) {
	panic("skeleton")
}
