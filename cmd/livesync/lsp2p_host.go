package main

import (
	"context"
	"fmt"
	"log/slog"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/livesync-go/livesync-go/engine/livesyncrpc"
)

func runLSP2PHost(env *cliEnv, args []string) error {
	c := env.newCommand("p2p-host", "p2p-host [--group ID] [--relay URL] [--auto-accept NAMES] [flags]")
	var f lsp2pFlags
	addLSP2PFlags(c.fs, &f, 0, true)
	follow := c.fs.String("follow", "", "the peers to pull from when they announce changes: device names as --auto-accept takes them (the plugin's P2P_AutoWatchPeers; default: follow)")
	broadcast := c.fs.Bool("broadcast", false, "announce this replica's changes to the accepted peers, so that those following it pull (the plugin's P2P_AutoBroadcast; default: broadcast)")
	set, device, err := c.parseLSP2P(args, &f)
	if err != nil {
		return err
	}
	rep, err := c.replica(false)
	if err != nil {
		return err
	}
	defer rep.Close()
	if !rep.v.HasVault() {
		return fmt.Errorf("the local replica %s %w", rep.path, errNoVaultToServe)
	}
	pass, err := c.replicaPassphrase(rep, set)
	if err != nil {
		return err
	}
	peer, err := c.servedPeer(rep, set, device, pass)
	if err != nil {
		return err
	}
	peer.Follow = set.cfg.Follow
	if flagSet(c.fs, "follow") {
		peer.Follow = *follow
	}
	if _, err := livesyncrpc.ParsePatterns(peer.Follow); err != nil {
		return usageError{"--follow: " + err.Error()}
	}
	if !flagSet(c.fs, "broadcast") {
		*broadcast = set.cfg.Broadcast
	}
	log := c.hostLogger()
	n, err := c.joinRoom(&f, set, peer, log)
	if err != nil {
		return err
	}
	defer n.Close()
	ctx, stop := signal.NotifyContext(c.ctx, syscall.SIGTERM)
	defer stop()
	log.Info("p2p-host: serving the local replica", "group", set.room.RoomID, "device", device, "peer_id", n.SelfID(),
		"relays", set.relayHosts(), "replica", rep.path, "broadcast", *broadcast, "follow", peer.Follow)
	if set.autoAccept == "" {
		log.Warn("p2p-host: no auto-accept pattern, so no peer is served: a headless peer serves only the devices --auto-accept (auto_accept, the plugin's P2P_AutoAcceptingPeers) names")
	}
	n.onProgress(func(p livesyncrpc.Progress) { hostProgress(log, p, n) })
	w := &peerWatch{n: n, log: log, names: map[string]string{}}
	w.start(ctx)
	if *broadcast {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			if err := n.Hosted().Broadcast(ctx); err != nil && ctx.Err() == nil {
				log.Warn("p2p-host: announcing changes stopped", "err", err)
			}
		}()
	}
	<-ctx.Done()
	log.Info("p2p-host: leaving the room")
	err = n.Close()
	w.wg.Wait()
	if err != nil {
		log.Debug("p2p-host: closing the room", "err", err)
	}
	return nil
}

// hostLogger logs what p2p-host does on stderr: peers arriving and
// leaving, replications, with --verbose the room's details too, with
// --quiet warnings only.
func (c *command) hostLogger() *slog.Logger {
	level := slog.LevelInfo
	switch {
	case c.cf.verbose:
		level = slog.LevelDebug
	case c.cf.quiet:
		level = slog.LevelWarn
	}
	return slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: level}))
}

// peerWatch logs the peers arriving (once their advertisement is in,
// with whether they are served) and leaving.
type peerWatch struct {
	n   *lsp2pNode
	log *slog.Logger
	wg  sync.WaitGroup

	mu    sync.Mutex
	names map[string]string // the peers present: id -> device name
}

func (w *peerWatch) start(ctx context.Context) {
	w.n.Room().OnPeerJoin(func(id string) {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			wctx, cancel := context.WithTimeout(ctx, adWait)
			defer cancel()
			ad, err := w.n.WaitPeer(wctx, id)
			if err != nil || ad.PeerID != id {
				w.log.Debug("p2p-host: a peer joined without advertising itself", "peer", id)
				return
			}
			w.arrived(ctx, ad)
		}()
	})
	w.n.Room().OnPeerLeave(func(id string) {
		w.mu.Lock()
		name, ok := w.names[id]
		delete(w.names, id)
		w.mu.Unlock()
		if ok {
			w.log.Info("p2p-host: peer left", "peer", id, "device", name)
		}
	})
	for _, ad := range w.n.Known() { // arrived before the watch began
		w.arrived(ctx, ad)
	}
}

// adWait bounds the wait for a joining peer's advertisement.
const adWait = 15 * time.Second

func (w *peerWatch) arrived(ctx context.Context, ad livesyncrpc.Advertisement) {
	w.mu.Lock()
	_, seen := w.names[ad.PeerID]
	w.names[ad.PeerID] = ad.Name
	w.mu.Unlock()
	if seen {
		return
	}
	if w.n.Hosted().CanAccept(ctx, ad.PeerID, livesyncrpc.MethodInfo) {
		w.log.Info("p2p-host: peer arrived, served", "peer", ad.PeerID, "device", ad.Name, "platform", ad.Platform)
		return
	}
	w.log.Warn("p2p-host: peer arrived, not served: no auto-accept pattern names its device", "peer", ad.PeerID, "device", ad.Name, "platform", ad.Platform)
}

// hostProgress logs one step of a replication with a peer: this device
// pulling from it (after its legacy/reqSync), or it pulling from this
// device.
func hostProgress(log *slog.Logger, p livesyncrpc.Progress, n *lsp2pNode) {
	name := ""
	for _, ad := range n.Known() {
		if ad.PeerID == p.Peer {
			name = ad.Name
		}
	}
	switch {
	case p.Sending && p.Info == nil:
		log.Info("p2p-host: peer finished pulling from this device", "peer", p.Peer, "device", name)
	case p.Sending:
		log.Info("p2p-host: peer pulling from this device", "peer", p.Peer, "device", name, "seq", p.Info.LastSeq, "of", p.Info.MaxSeqInBatch)
	case p.Info == nil:
		log.Info("p2p-host: pulled from peer", "peer", p.Peer, "device", name)
	default:
		log.Info("p2p-host: pulling from peer", "peer", p.Peer, "device", name, "seq", p.Info.LastSeq, "of", p.Info.MaxSeqInBatch)
	}
}
