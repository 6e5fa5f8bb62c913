package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/livesync-go/livesync-go/adapters/p2p/livesyncp2p"
	"github.com/livesync-go/livesync-go/engine/livesyncrpc"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/store"
	"github.com/livesync-go/livesync-go/engine/trystero"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// lsp2pNode is a joined room: the node, and what the room told of
// peers that could not join.
type lsp2pNode struct {
	*livesyncp2p.Node
	set lsp2pSettings

	mu        sync.Mutex
	wrongPass map[string]bool // peers whose sealed signalling did not open
	progress  func(livesyncrpc.Progress)
}

// incorrectPassword reports whether a peer failed the room password.
func (n *lsp2pNode) incorrectPassword() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.wrongPass) > 0
}

// onProgress sets the replicator's progress callback.
func (n *lsp2pNode) onProgress(fn func(livesyncrpc.Progress)) {
	n.mu.Lock()
	n.progress = fn
	n.mu.Unlock()
}

// joinRoom opens a node on db, serving it as peer says (SelfID, DB and
// OnProgress are filled in here).
func (c *command) joinRoom(f *lsp2pFlags, set lsp2pSettings, peer livesyncrpc.Config, log *slog.Logger) (*lsp2pNode, error) {
	pw, err := c.roomPassword(f, set)
	if err != nil {
		return nil, err
	}
	room := set.room
	room.Password = pw
	n := &lsp2pNode{set: set, wrongPass: map[string]bool{}}
	peer.OnProgress = func(p livesyncrpc.Progress) {
		n.mu.Lock()
		fn := n.progress
		n.mu.Unlock()
		if fn != nil {
			fn(p)
		}
	}
	ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
	defer cancel()
	node, err := livesyncp2p.Open(ctx, livesyncp2p.Config{Room: room, Peer: peer, Logger: c.log})
	if err != nil {
		if c.ctx.Err() != nil {
			return nil, c.ctx.Err()
		}
		return nil, exitError{exitUnreachable, fmt.Sprintf("cannot join group %s through %s: %v", safe(room.RoomID), set.relayHosts(), err)}
	}
	n.Node = node
	node.OnJoinError(func(id string, err error) {
		if errors.Is(err, trystero.ErrIncorrectPassword) {
			n.mu.Lock()
			first := !n.wrongPass[id]
			n.wrongPass[id] = true
			n.mu.Unlock()
			if first && log != nil {
				log.Warn("a peer of the group uses another room passphrase (incorrect room password)", "peer", id)
			}
			return
		}
		if log != nil {
			log.Debug("a peer could not join", "peer", id, "err", err)
		}
	})
	return n, nil
}

// lsp2pDeviceName is this device's name among the peers: the flag or
// device_name, else the vault's name (the replica's folder), as the
// plugin falls back on its vault's name.
func (c *command) lsp2pDeviceName(set lsp2pSettings) (string, error) {
	if set.device != "" {
		return set.device, nil
	}
	path, err := c.storePath()
	if err != nil {
		return "", err
	}
	if name := replicaFolderName(path); name != "" {
		return name, nil
	}
	return fallbackVaultName, nil
}

// wait sleeps for d, or until Ctrl-C.
func (c *command) wait(d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.ctx.Done():
		return c.ctx.Err()
	case <-t.C:
		return nil
	}
}

// parseLSP2P parses the flags of a P2P command that takes no
// arguments, then resolves its settings and this device's name.
func (c *command) parseLSP2P(args []string, f *lsp2pFlags) (lsp2pSettings, string, error) {
	if err := c.parse(args); err != nil {
		return lsp2pSettings{}, "", err
	}
	if len(c.pos) > 0 {
		return lsp2pSettings{}, "", usageError{c.fs.Name() + " takes no arguments (name the group with --group)"}
	}
	set, err := c.lsp2pSettings(f)
	if err != nil {
		return lsp2pSettings{}, "", err
	}
	device, err := c.lsp2pDeviceName(set)
	if err != nil {
		return lsp2pSettings{}, "", err
	}
	return set, device, nil
}

func runLSP2PPeers(env *cliEnv, args []string) error {
	c := env.newCommand("p2p-peers", "p2p-peers [--group ID] [--relay URL] [--wait 10s] [flags]")
	var f lsp2pFlags
	addLSP2PFlags(c.fs, &f, lsp2pPeersWait, false)
	set, device, err := c.parseLSP2P(args, &f)
	if err != nil {
		return err
	}
	// Listening needs no replica: an empty database, and nobody accepted.
	db, err := store.NewMemory(store.Options{Name: "p2p-peers"})
	if err != nil {
		return err
	}
	defer db.Close()
	n, err := c.joinRoom(&f, set, livesyncrpc.Config{DB: db, DBName: livesyncrpc.DBName(device), DeviceName: device}, nil)
	if err != nil {
		return err
	}
	defer n.Close()
	if !c.cf.quiet {
		fmt.Fprintf(c.stderr, "listening in group %s for %s\n", safe(set.room.RoomID), set.wait)
	}
	if err := c.wait(set.wait); err != nil {
		return err
	}
	peers := n.Known()
	if c.json {
		rows := make([]map[string]any, 0, len(peers))
		for _, ad := range peers {
			rows = append(rows, map[string]any{"peer_id": ad.PeerID, "device": ad.Name, "platform": ad.Platform})
		}
		writeJSON(c.stdout, map[string]any{"ok": true, "command": "p2p-peers", "group": set.room.RoomID,
			"peer_id": n.SelfID(), "device": device, "peers": rows, "incorrect_room_password": n.incorrectPassword()})
		return nil
	}
	if len(peers) == 0 {
		fmt.Fprintf(c.stdout, "no peer of group %s answered within %s (check the group, the relays and the room passphrase, and that the other devices are in the room: livesync p2p-host, or the plugin with peer-to-peer sync on)\n", safe(set.room.RoomID), set.wait)
	} else {
		tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "PEER\tDEVICE\tPLATFORM")
		for _, ad := range peers {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", safe(ad.PeerID), safe(cmpOr(ad.Name, "-")), safe(cmpOr(ad.Platform, "-")))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if n.incorrectPassword() {
		fmt.Fprintf(c.stderr, "livesync p2p-peers: some peers of group %s use another room passphrase (incorrect room password)\n", safe(set.room.RoomID))
	}
	return nil
}

// servedPeer is the replicator's configuration of the local replica:
// its vault's tweaks and passphrase, the device name, the decisions
// beside it and the accept patterns.
func (c *command) servedPeer(rep *replica, set lsp2pSettings, device, passphrase string) (livesyncrpc.Config, error) {
	dec, err := livesyncp2p.OpenFileDecisions(set.decisionsPath())
	if err != nil {
		return livesyncrpc.Config{}, &localError{set.decisionsPath(), err}
	}
	var tweaks negotiate.TweakValues
	if rep.v.HasVault() {
		if tweaks, err = rep.v.TweakValues(); err != nil {
			return livesyncrpc.Config{}, err
		}
	}
	return livesyncrpc.Config{DB: rep.st, DBName: livesyncrpc.DBName(vaultNameFor(rep, remoteSpec{})), DeviceName: device,
		Tweaks: tweaks, Passphrase: passphrase, AutoAccept: set.autoAccept, AutoDeny: set.autoDeny, Decisions: dec}, nil
}

// replicaPassphrase gives an existing vault that needs one its
// passphrase (checked against the replica's documents); for a replica
// without a vault it returns the passphrase if one is set, without
// asking.
func (c *command) replicaPassphrase(rep *replica, set lsp2pSettings) (string, error) {
	if !rep.v.HasVault() {
		return c.vaultPassphrase(set, false)
	}
	s, err := rep.v.Settings()
	if err != nil {
		return "", err
	}
	if !vault.NeedsPassphrase(s) {
		return "", nil
	}
	if s.Passphrase, err = c.vaultPassphrase(set, true); err != nil {
		return "", err
	}
	if s.Passphrase == "" {
		return "", usageError{"the vault is end-to-end encrypted (or its paths obfuscated): its passphrase is needed, since documents cross to peers in plaintext; set $LIVESYNC_PASSPHRASE, or give --passphrase-file (or passphrase_file in [livesync_p2p])"}
	}
	if err := checkLocalPassphrase(c.ctx, rep, s); err != nil {
		return "", err
	}
	return s.Passphrase, nil
}
