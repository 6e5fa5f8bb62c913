//go:build !js

package livesyncp2p

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/livesync-go/livesync-go/adapters/p2p/trysteronet"
	"github.com/livesync-go/livesync-go/engine/livesyncrpc"
	"github.com/livesync-go/livesync-go/engine/rpcroom"
)

// Config configures a Node.
type Config struct {
	// Room is the Trystero room: RoomID (LiveSync's group id), Password
	// (trystero.RoomPassword of the P2P passphrase), Relays, ICE
	// settings, AppID. See trysteronet.Config.
	Room trysteronet.Config
	// Peer is the replicator: DB (the plaintext local-form replica),
	// DBName, DeviceName, Tweaks, Passphrase (the vault's E2EE
	// passphrase), AutoAccept/AutoDeny, Decisions, Follow, OnProgress.
	// SelfID is set from the room when empty. See livesyncrpc.Config.
	Peer livesyncrpc.Config
	// RPC tunes the RPC layer (MaxWirePayloadBytes and the limits);
	// Transport and CanAccept are set by Open.
	RPC rpcroom.Config
	// Logger receives debug records of the room and the RPC layer (peer
	// ids and errors, never documents or secrets); nil discards.
	Logger *slog.Logger
	// OnJoinError, if set, is registered before the room starts, so no
	// join error is missed (see Node.OnJoinError).
	OnJoinError func(peer string, err error)
}

// ErrAmbiguousPeer means a device name given to WaitPeer, Pull or Sync
// matches more than one peer present; name one by id.
var ErrAmbiguousPeer = errors.New("livesyncp2p: more than one peer has this device name")

// Node is a joined room with a LiveSync replicator attached. Its methods
// are safe for concurrent use.
type Node struct {
	room   *trysteronet.Room
	hosted *livesyncrpc.Hosted

	mu      sync.Mutex
	changed chan struct{} // closed and replaced whenever the known peers change
	closed  bool
}

// Open joins the room described by cfg.Room and serves cfg.Peer in it:
// trysteronet.New, livesyncrpc.Attach, then the room's Start. ctx bounds
// only the start; the node stays until Close.
func Open(ctx context.Context, cfg Config) (*Node, error) {
	if cfg.Logger != nil {
		if cfg.Room.Logger == nil {
			cfg.Room.Logger = cfg.Logger
		}
		if cfg.RPC.Logger == nil {
			cfg.RPC.Logger = cfg.Logger
		}
	}
	room, err := trysteronet.New(cfg.Room)
	if err != nil {
		return nil, err
	}
	n := &Node{room: room, changed: make(chan struct{})}
	hosted, err := livesyncrpc.Attach(observedPort{room, n}, cfg.Peer, cfg.RPC)
	if err != nil {
		_ = room.Close()
		return nil, err
	}
	n.hosted = hosted
	if cfg.OnJoinError != nil {
		room.OnJoinError(cfg.OnJoinError)
	}
	if err := room.Start(ctx); err != nil {
		return nil, errors.Join(err, hosted.Close(), room.Close())
	}
	return n, nil
}

// Close leaves the room: it stops the replicator (its pulls and
// broadcasts end) and the RPC layer, then closes the connections.
func (n *Node) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	n.mu.Unlock()
	err := n.hosted.Close()
	err = errors.Join(err, n.room.Close())
	n.notify()
	return err
}

// Hosted returns the replicator attached to the room.
func (n *Node) Hosted() *livesyncrpc.Hosted { return n.hosted }

// Room returns the Trystero room.
func (n *Node) Room() *trysteronet.Room { return n.room }

// SelfID returns this node's Trystero peer id.
func (n *Node) SelfID() string { return n.room.SelfID() }

// OnJoinError adds a function told of the room's join errors; a wrong
// room password on either side matches trystero.ErrIncorrectPassword.
func (n *Node) OnJoinError(fn func(peer string, err error)) { n.room.OnJoinError(fn) }

// Known returns the advertisements of the peers present, sorted by peer
// id.
func (n *Node) Known() []livesyncrpc.Advertisement {
	ads := n.hosted.Known()
	slices.SortFunc(ads, func(a, b livesyncrpc.Advertisement) int { return strings.Compare(a.PeerID, b.PeerID) })
	return ads
}

// WaitPeer waits until a peer present has advertised itself as
// idOrName: its peer id exactly, else its device name exactly. A
// name that more than one peer present goes by is ErrAmbiguousPeer
// (the error lists their ids).
//
// Before it returns the peer, WaitPeer sends it this node's
// advertisement again: both sides advertise as they meet, but this node
// may hear the peer's before the peer has heard this one's, and a peer
// refuses a caller it has no advertisement of (legacy/!reqAuth answers
// false, other requests are dropped). The data channel is ordered, so
// the advertisement arrives before any request that follows WaitPeer.
func (n *Node) WaitPeer(ctx context.Context, idOrName string) (livesyncrpc.Advertisement, error) {
	if idOrName == "" {
		return livesyncrpc.Advertisement{}, errors.New("livesyncp2p: no peer named")
	}
	for {
		n.mu.Lock()
		ch, closed := n.changed, n.closed
		n.mu.Unlock()
		if closed {
			return livesyncrpc.Advertisement{}, trysteronet.ErrClosed
		}
		ad, ok, err := match(n.Known(), idOrName)
		if err != nil {
			return ad, err
		}
		if ok {
			_ = n.hosted.Advertise(ad.PeerID) // a peer that is gone fails the call that follows
			return ad, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return livesyncrpc.Advertisement{}, fmt.Errorf("livesyncp2p: waiting for peer %q: %w", idOrName, ctx.Err())
		}
	}
}

// match finds idOrName among ads (sorted by id).
func match(ads []livesyncrpc.Advertisement, idOrName string) (livesyncrpc.Advertisement, bool, error) {
	var byName []livesyncrpc.Advertisement
	for _, ad := range ads {
		if ad.PeerID == idOrName {
			return ad, true, nil
		}
		if ad.Name == idOrName { // exact, as the plugin's CLI resolvePeer (src/apps/cli/commands/p2p.ts)
			byName = append(byName, ad)
		}
	}
	switch len(byName) {
	case 0:
		return livesyncrpc.Advertisement{}, false, nil
	case 1:
		return byName[0], true, nil
	}
	ids := make([]string, len(byName))
	for i, ad := range byName {
		ids[i] = ad.PeerID
	}
	return livesyncrpc.Advertisement{}, false, fmt.Errorf("%w: %q is the name of peers %s", ErrAmbiguousPeer, idOrName, strings.Join(ids, ", "))
}

// Pull waits for the peer (WaitPeer) and replicates from it into the
// local database (livesyncrpc.Peer.Pull).
func (n *Node) Pull(ctx context.Context, idOrName string, o livesyncrpc.PullOptions) (livesyncrpc.Result, error) {
	ad, err := n.WaitPeer(ctx, idOrName)
	if err != nil {
		return livesyncrpc.Result{}, err
	}
	return n.hosted.Pull(ctx, ad.PeerID, o)
}

// Sync waits for the peer (WaitPeer), pulls from it, then asks it to
// pull from this node (legacy/reqSync) and waits for that, as the
// plugin's "sync" with a peer does.
func (n *Node) Sync(ctx context.Context, idOrName string, o livesyncrpc.PullOptions) (livesyncrpc.Result, error) {
	ad, err := n.WaitPeer(ctx, idOrName)
	if err != nil {
		return livesyncrpc.Result{}, err
	}
	return n.hosted.Sync(ctx, ad.PeerID, o)
}

// notify wakes the waiters of WaitPeer.
func (n *Node) notify() {
	n.mu.Lock()
	close(n.changed)
	n.changed = make(chan struct{})
	n.mu.Unlock()
}

// observedPort is the room as Attach sees it, with the node told after
// each advertisement is handled and each peer leaves.
type observedPort struct {
	*trysteronet.Room
	n *Node
}

func (p observedPort) OnAction(action string, fn func(peer string, body []byte)) {
	if action == livesyncrpc.ActionAd && fn != nil {
		inner := fn
		fn = func(peer string, body []byte) {
			inner(peer, body)
			p.n.notify()
		}
	}
	p.Room.OnAction(action, fn)
}

func (p observedPort) OnPeerLeave(fn func(peer string)) {
	p.Room.OnPeerLeave(func(peer string) {
		fn(peer)
		p.n.notify()
	})
}
