//go:build !js

package p2p

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/livesync-go/livesync-go/engine/replicate"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// DefaultPeerWait is how long a one-shot SyncVault waits for approved
// peers to announce themselves when VaultSyncOptions.Wait is zero.
const DefaultPeerWait = 10 * time.Second

// Pauses of a live SyncVault before attaching to a peer again after a
// failure: doubling from retryPause up to maxRetryPause.
const (
	retryPause    = 5 * time.Second
	maxRetryPause = 5 * time.Minute
)

// ErrNoApprovedPeers: the peer book approves no peer, so there is no one
// to sync with.
var ErrNoApprovedPeers = errors.New("p2p: no approved peer: approve the other devices first (livesync p2p approve <peer id>)")

// ErrNoPeerFound: no approved peer announced itself in time.
var ErrNoPeerFound = errors.New("p2p: no approved peer found; check the group passphrase (a different one is a different group), the Nostr relays, and that another device of the group is running")

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
	// OnPeer reports each peer's outcome (nil error: synced; when Live,
	// nil means the live sync with the peer started). Calls never
	// overlap.
	OnPeer func(id peer.ID, res vault.SyncResult, err error)
}

// VaultSyncResult is what a one-shot SyncVault did.
type VaultSyncResult struct {
	Peers  []peer.ID // the peers synced with
	Failed map[peer.ID]error
	Hunt   vault.HuntResult
}

// SyncVault syncs v with every approved peer of g.
//
// One-shot (o.Live false): it waits up to o.Wait for the approved peers
// to be found (returning early once every approved peer is), attaches and
// syncs each in turn (a failing peer does not stop the others), hunts the
// held files' chunks across the peers when o.Hunt, and detaches. It fails
// when no approved peer was found, or when every peer failed.
//
// Live: it runs a live sync with each approved peer while the peer is
// present (from PeerFound until PeerLost or PeerRevoked), attaching again
// after failures, and hunts on every arrival when o.Hunt, until ctx ends;
// it then returns ctx's error once every sync it started has stopped.
//
// When v also serves the group (ServedVault), documents that peers push
// to it arrive in the replica without vault events.
func SyncVault(ctx context.Context, v *vault.Vault, g *Group, o VaultSyncOptions) (VaultSyncResult, error) {
	if o.Direction == 0 {
		o.Direction = replicate.Sync
	}
	var mu sync.Mutex
	if on := o.OnPeer; on != nil {
		o.OnPeer = func(id peer.ID, res vault.SyncResult, err error) {
			mu.Lock()
			defer mu.Unlock()
			on(id, res, err)
		}
	} else {
		o.OnPeer = func(peer.ID, vault.SyncResult, error) {}
	}
	if o.Live {
		return syncLive(ctx, v, g, o)
	}
	return syncOnce(ctx, v, g, o)
}

func syncOnce(ctx context.Context, v *vault.Vault, g *Group, o VaultSyncOptions) (VaultSyncResult, error) {
	wait := o.Wait
	if wait <= 0 {
		wait = DefaultPeerWait
	}
	ids, err := waitForPeers(ctx, g, wait)
	if err != nil {
		return VaultSyncResult{}, err
	}
	res := VaultSyncResult{Failed: map[peer.ID]error{}}
	var links []*vault.Link
	defer func() {
		for _, l := range links {
			v.Detach(l)
		}
	}()
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		l, sr, err := syncPeer(ctx, v, g, id, o)
		if l != nil {
			links = append(links, l)
		}
		o.OnPeer(id, sr, err)
		if err != nil {
			res.Failed[id] = err
			continue
		}
		res.Peers = append(res.Peers, id)
	}
	if o.Hunt && len(links) > 0 {
		h, err := v.Hunt(ctx, vault.HuntOptions{Once: true, Remotes: links})
		res.Hunt = h
		if err != nil {
			return res, fmt.Errorf("p2p: hunt across the peers: %w", err)
		}
	}
	if len(res.Peers) == 0 {
		errs := []error{errors.New("p2p: no peer could be synced with")}
		for _, id := range ids {
			errs = append(errs, fmt.Errorf("%s: %w", id, res.Failed[id]))
		}
		return res, errors.Join(errs...)
	}
	return res, nil
}

// syncPeer attaches to id and syncs once. The link is returned even when
// the sync failed (the hunt may still ask the peer).
func syncPeer(ctx context.Context, v *vault.Vault, g *Group, id peer.ID, o VaultSyncOptions) (*vault.Link, vault.SyncResult, error) {
	r := g.Remote(id)
	if r == nil {
		return nil, vault.SyncResult{}, errors.New("p2p: the peer is no longer approved")
	}
	l, err := v.Attach(ctx, r, o.Attach)
	if err != nil {
		return nil, vault.SyncResult{}, err
	}
	sr, err := v.Replicate(ctx, l, o.Direction, vault.SyncOptions{})
	return l, sr, err
}

// waitForPeers waits up to wait for approved peers to be present, and
// returns early once every approved peer is.
func waitForPeers(ctx context.Context, g *Group, wait time.Duration) ([]peer.ID, error) {
	approved := g.book.Approved()
	if len(approved) == 0 {
		return nil, ErrNoApprovedPeers
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	found := make(chan peer.ID)
	stop := g.Watch(func(e PeerEvent) {
		if e.Kind == PeerFound {
			select {
			case found <- e.Peer.ID:
			case <-wctx.Done():
			}
		}
	})
	defer stop()
	defer cancel() // before stop: a watcher blocked on found returns
	present := map[peer.ID]bool{}
	for _, p := range g.Peers() {
		if p.Approved && p.Present {
			present[p.ID] = true
		}
	}
	all := func() bool {
		for _, e := range approved {
			if !present[e.ID] {
				return false
			}
		}
		return true
	}
wait:
	for !all() {
		select {
		case id := <-found:
			present[id] = true
		case <-wctx.Done():
			break wait
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var ids []peer.ID
	for id := range present {
		if _, ok := g.book.Allow().Device(id); ok {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil, ErrNoPeerFound
	}
	slices.SortFunc(ids, func(a, b peer.ID) int { return strings.Compare(string(a), string(b)) })
	return ids, nil
}

// liveSync runs one live sync per present approved peer.
type liveSync struct {
	ctx context.Context
	v   *vault.Vault
	g   *Group
	o   VaultSyncOptions
	wg  sync.WaitGroup
	// poke asks the hunter for a hunt across the current links.
	poke chan struct{}

	mu     sync.Mutex
	peers  map[peer.ID]*livePeer
	links  map[peer.ID]*vault.Link
	synced map[peer.ID]bool
	failed map[peer.ID]error
}

// livePeer is one peer's running sync; done closes when it has stopped.
type livePeer struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func syncLive(ctx context.Context, v *vault.Vault, g *Group, o VaultSyncOptions) (VaultSyncResult, error) {
	s := &liveSync{ctx: ctx, v: v, g: g, o: o, poke: make(chan struct{}, 1),
		peers: map[peer.ID]*livePeer{}, links: map[peer.ID]*vault.Link{}, synced: map[peer.ID]bool{}, failed: map[peer.ID]error{}}
	events := make(chan PeerEvent)
	stop := g.Watch(func(e PeerEvent) {
		select {
		case events <- e:
		case <-ctx.Done():
		}
	})
	for _, p := range g.Peers() {
		if p.Approved && p.Present {
			s.start(p.ID)
		}
	}
	if o.Hunt {
		s.wg.Go(s.hunter)
	}
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case e := <-events:
			switch e.Kind {
			case PeerFound:
				s.start(e.Peer.ID)
			case PeerLost, PeerRevoked:
				s.halt(e.Peer.ID)
			}
		}
	}
	stop()
	s.wg.Wait()
	res := VaultSyncResult{Failed: s.failed}
	for id := range s.synced {
		res.Peers = append(res.Peers, id)
		delete(res.Failed, id)
	}
	slices.SortFunc(res.Peers, func(a, b peer.ID) int { return strings.Compare(string(a), string(b)) })
	return res, ctx.Err()
}

// start runs id's live sync unless it runs already; a sync of id that is
// still stopping is waited for first.
func (s *liveSync) start(id peer.ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev := s.peers[id]
	if prev != nil && prev.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(s.ctx)
	lp := &livePeer{cancel: cancel, done: make(chan struct{})}
	s.peers[id] = lp
	s.wg.Go(func() {
		defer close(lp.done)
		if prev != nil {
			<-prev.done
		}
		s.runPeer(ctx, id)
	})
}

// halt stops id's live sync (without waiting for it).
func (s *liveSync) halt(id peer.ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lp := s.peers[id]
	if lp == nil || lp.cancel == nil {
		return
	}
	lp.cancel()
	lp.cancel = nil // stopping: a later start waits for done
}

// runPeer attaches to id and syncs live until ctx ends, attaching again
// after a failure with a growing pause.
func (s *liveSync) runPeer(ctx context.Context, id peer.ID) {
	pause := retryPause
	for ctx.Err() == nil {
		err := s.attachAndSync(ctx, id)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			s.mu.Lock()
			s.failed[id] = err
			s.mu.Unlock()
			s.o.OnPeer(id, vault.SyncResult{}, err)
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		pause = min(2*pause, maxRetryPause)
	}
}

func (s *liveSync) attachAndSync(ctx context.Context, id peer.ID) error {
	r := s.g.Remote(id)
	if r == nil {
		return errors.New("p2p: the peer is no longer approved")
	}
	l, err := s.v.Attach(ctx, r, s.o.Attach)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.links[id] = l
	s.synced[id] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.links, id)
		s.mu.Unlock()
		s.v.Detach(l)
	}()
	s.o.OnPeer(id, vault.SyncResult{}, nil)
	select {
	case s.poke <- struct{}{}:
	default:
	}
	_, err = s.v.Replicate(ctx, l, s.o.Direction, vault.SyncOptions{Live: true})
	return err
}

// hunter hunts across the current links whenever a peer arrives.
func (s *liveSync) hunter() {
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.poke:
		}
		s.mu.Lock()
		links := make([]*vault.Link, 0, len(s.links))
		for _, l := range s.links {
			links = append(links, l)
		}
		s.mu.Unlock()
		if len(links) == 0 {
			continue
		}
		if _, err := s.v.Hunt(s.ctx, vault.HuntOptions{Once: true, Remotes: links}); err != nil && s.ctx.Err() == nil {
			s.g.log.Warn("p2p: hunting across the peers failed", "err", err)
		}
	}
}
