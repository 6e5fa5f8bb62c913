package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/livesync-go/livesync-go/adapters/p2p/livesyncp2p"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesyncrpc"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/replicate"
	"github.com/livesync-go/livesync-go/engine/rpcroom"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// lsp2pSync is one run of p2p-sync.
type lsp2pSync struct {
	*command
	f      lsp2pFlags
	set    lsp2pSettings
	rep    *replica
	n      *lsp2pNode
	device string
	pass   string
	ad     livesyncrpc.Advertisement
	// adopted: the replica took the peer's vault settings in this run,
	// after the room was joined without them (the peer's differences
	// from "no settings" say nothing).
	adopted bool
}

func runLSP2PSync(env *cliEnv, args []string) error {
	c := env.newCommand("p2p-sync", "p2p-sync PEER [--group ID] [--relay URL] [--wait 30s] [flags]")
	r := &lsp2pSync{command: c}
	addLSP2PFlags(c.fs, &r.f, lsp2pSyncWait, true)
	if err := c.parse(args); err != nil {
		return err
	}
	if len(c.pos) != 1 || strings.TrimSpace(c.pos[0]) == "" {
		return usageError{"p2p-sync takes one peer: its peer id or device name (livesync p2p-peers lists them)"}
	}
	return r.run(strings.TrimSpace(c.pos[0]))
}

func (r *lsp2pSync) run(target string) error {
	var err error
	if r.set, err = r.lsp2pSettings(&r.f); err != nil {
		return err
	}
	if r.device, err = r.lsp2pDeviceName(r.set); err != nil {
		return err
	}
	if r.rep, err = r.replica(true); err != nil {
		return err
	}
	defer r.rep.Close()
	if r.pass, err = r.replicaPassphrase(r.rep, r.set); err != nil {
		return err
	}
	peer, err := r.servedPeer(r.rep, r.set, r.device, r.pass)
	if err != nil {
		return err
	}
	if r.n, err = r.joinRoom(&r.f, r.set, peer, r.log); err != nil {
		return err
	}
	defer r.n.Close()
	if !r.cf.quiet {
		fmt.Fprintf(r.stderr, "joined group %s as %s; waiting up to %s for peer %s\n", safe(r.set.room.RoomID), safe(r.device), r.set.wait, safe(target))
	}
	if r.ad, err = r.waitPeer(target); err != nil {
		return err
	}
	// The peer named on the command line may pull back from this one
	// (legacy/reqSync) for this session, unless an auto-deny pattern
	// names it; other peers need an auto-accept pattern.
	if deny, _ := livesyncrpc.ParsePatterns(r.set.autoDeny); !deny.Match(r.ad.Name) {
		_ = r.n.Hosted().Decide(r.ctx, r.ad, livesyncrpc.Decision{Accept: true, Temporary: true})
	}
	if err := r.accepted(); err != nil {
		return err
	}
	if !r.rep.v.HasVault() {
		if err := r.adoptVault(); err != nil {
			return err
		}
		r.adopted = true
	}
	return r.sync()
}

// waitPeer waits --wait for the peer to advertise itself.
func (r *lsp2pSync) waitPeer(target string) (livesyncrpc.Advertisement, error) {
	ctx, cancel := context.WithTimeout(r.ctx, r.set.wait)
	defer cancel()
	ad, err := r.n.WaitPeer(ctx, target)
	switch {
	case err == nil:
		return ad, nil
	case r.ctx.Err() != nil:
		return ad, r.ctx.Err()
	case errors.Is(err, livesyncp2p.ErrAmbiguousPeer):
		return ad, usageError{strings.TrimPrefix(err.Error(), "livesyncp2p: ") + "; name it by peer id"}
	case r.n.incorrectPassword():
		return ad, exitError{exitAuth, fmt.Sprintf("incorrect room password: a peer of group %s uses another room passphrase (the plugin's P2P_passphrase), and peer %s was not found within %s; check $%s or the room passphrase file",
			safe(r.set.room.RoomID), safe(target), r.set.wait, lsp2pRoomPassphraseEnv)}
	case errors.Is(err, context.DeadlineExceeded):
		return ad, exitError{exitUnreachable, fmt.Sprintf("peer %s was not found in group %s within %s: check that it is in the room (livesync p2p-host, or the plugin with peer-to-peer sync on), the group, the relays (%s) and the room passphrase",
			safe(target), safe(r.set.room.RoomID), r.set.wait, r.set.relayHosts())}
	}
	return ad, err
}

// accepted asks the peer whether it accepts this device
// (legacy/!reqAuth). Node.WaitPeer has sent this device's advertisement
// ahead of the question on the ordered channel, so the peer knows the
// device name it decides on.
func (r *lsp2pSync) accepted() error {
	var ok bool
	raw, err := r.n.Hosted().RPC.Call(r.ctx, r.ad.PeerID, livesyncrpc.MethodReqAuth, r.n.SelfID())
	if err == nil {
		err = json.Unmarshal(raw, &ok)
	}
	switch {
	case err == nil && ok:
		return nil
	case errors.Is(err, rpcroom.ErrTimeout):
		return exitError{exitRefused, fmt.Sprintf("peer %s did not say in time whether it accepts this device: a plugin asks its user, so accept %q there (or add it to its auto-accepting peers) and run p2p-sync again", r.peerName(), r.device)}
	case err != nil:
		return r.syncErr(0, err)
	}
	return r.syncErr(0, livesyncrpc.ErrRejected)
}

// adoptVault records the peer's vault settings in a replica that holds
// no vault yet (legacy/getTweakSettings), so that its files read back;
// an encrypted vault needs its passphrase here.
func (r *lsp2pSync) adoptVault() error {
	h := r.n.Hosted()
	raw, err := h.RPC.Call(r.ctx, r.ad.PeerID, livesyncrpc.MethodGetTweakSettings, r.n.SelfID())
	if err != nil {
		return r.syncErr(0, err)
	}
	var tv negotiate.TweakValues
	if err := tv.UnmarshalJSON(raw); err != nil {
		return exitError{exitFailed, fmt.Sprintf("peer %s sent settings that are not a JSON object", r.peerName())}
	}
	tv.Delete("passphrase") // a three-minute hash, not a setting
	s, err := vault.SettingsOf(tv)
	if err != nil {
		return exitError{exitRefused, fmt.Sprintf("peer %s: %v", r.peerName(), err)}
	}
	if vault.NeedsPassphrase(s) && r.pass == "" {
		return usageError{fmt.Sprintf("peer %s's vault is end-to-end encrypted (or its paths obfuscated): give its passphrase with $LIVESYNC_PASSPHRASE or --passphrase-file (documents cross to peers in plaintext, so this device needs it)", r.peerName())}
	}
	s.Passphrase = r.pass
	return r.rep.fileErr("", r.rep.v.Create(r.ctx, s))
}

// peerName is the peer's device name and id, for messages.
func (r *lsp2pSync) peerName() string {
	if r.ad.Name == "" {
		return safe(r.ad.PeerID)
	}
	return fmt.Sprintf("%s (%s)", safe(r.ad.Name), safe(r.ad.PeerID))
}

// sync pulls from the peer, then has it pull from this device.
func (r *lsp2pSync) sync() error {
	pr := newProgress(r.cliEnv, r.cf.quiet || r.json, false)
	var mu sync.Mutex
	var pulled int
	var back *livesyncrpc.ProgressInfo
	r.n.onProgress(func(p livesyncrpc.Progress) {
		if p.Peer != r.ad.PeerID || !p.Sending || p.Info == nil {
			return
		}
		mu.Lock()
		info := *p.Info
		back = &info
		mu.Unlock()
		if pr.bar { // sequences, not documents: a bar only
			pr.update(replicate.Progress{Direction: replicate.Push, DocsRead: int(info.LastSeq), Pending: pending(info)})
		}
	})
	o := livesyncrpc.PullOptions{OnBatch: func(_ context.Context, docs []json.RawMessage, info livesyncrpc.ProgressInfo) {
		mu.Lock()
		pulled += len(docs)
		n := pulled
		mu.Unlock()
		pr.update(replicate.Progress{Direction: replicate.Pull, DocsRead: n, DocsWritten: n, Pending: pending(info)})
	}}
	res, err := r.n.Hosted().Sync(r.ctx, r.ad.PeerID, o)
	pr.finish()
	if err != nil {
		return r.syncErr(res.Docs, err)
	}
	if r.adopted {
		res.TweakMismatch = nil
	}
	if len(res.TweakMismatch) > 0 && !r.cf.quiet {
		fmt.Fprintf(r.stderr, "warning: peer %s's vault settings differ from this vault's: %s\n", r.peerName(), safe(strings.Join(res.TweakMismatch, ", ")))
	}
	mu.Lock()
	defer mu.Unlock()
	if r.json {
		out := map[string]any{"ok": true, "command": "p2p-sync", "group": r.set.room.RoomID, "peer_id": r.ad.PeerID,
			"device": r.ad.Name, "platform": r.ad.Platform, "docs_pulled": res.Docs, "batches": res.Batches,
			"pulled_back": true, "tweak_mismatch": nonNil(res.TweakMismatch)}
		if back != nil {
			out["pulled_back_seq"] = back.LastSeq
		}
		writeJSON(r.stdout, out)
		return nil
	}
	fmt.Fprintf(r.stdout, "synced with peer %s: pulled %d %s; the peer pulled back from this device\n", r.peerName(), res.Docs, plural(res.Docs, "doc", "docs"))
	return nil
}

func pending(info livesyncrpc.ProgressInfo) int {
	if info.MaxSeqInBatch <= info.LastSeq {
		return 0
	}
	return int(info.MaxSeqInBatch - info.LastSeq)
}

// syncErr puts a failed sync in this CLI's words and exit codes.
func (r *lsp2pSync) syncErr(docs int, err error) error {
	var le *localError
	switch {
	case r.ctx.Err() != nil:
		return r.ctx.Err()
	case errors.As(err, &le):
		return err
	case errors.Is(err, livesyncrpc.ErrRejected):
		return exitError{exitRefused, fmt.Sprintf("peer %s rejected this device: on that device, add %q to the auto-accepting peers (the plugin's P2P_AutoAcceptingPeers; auto_accept or --auto-accept of livesync p2p-host)", r.peerName(), r.device)}
	case errors.Is(err, livesyncrpc.ErrPassphraseMismatch):
		return exitError{exitPassphrase, fmt.Sprintf("peer %s's vault passphrase is not this vault's: nothing was replicated; check $LIVESYNC_PASSPHRASE or --passphrase-file", r.peerName())}
	case errors.Is(err, livesyncrpc.ErrRemoteSync):
		return exitError{exitRefused, fmt.Sprintf("pulled %d %s from peer %s, but it could not pull back: %s", docs, plural(docs, "doc", "docs"), r.peerName(),
			safe(strings.TrimPrefix(err.Error(), livesyncrpc.ErrRemoteSync.Error()+": ")))}
	case errors.Is(err, livesyncrpc.ErrInProgress):
		return exitError{exitRefused, fmt.Sprintf("a replication with peer %s is already running", r.peerName())}
	}
	var ee *engine.Error
	if errors.As(err, &ee) && (ee.Stage == engine.StageProtocol || ee.Stage == engine.StageDecode) {
		return exitError{exitFailed, fmt.Sprintf("peer %s answered what this device cannot read: %s", r.peerName(), safe(err.Error()))}
	}
	return exitError{exitUnreachable, fmt.Sprintf("sync with peer %s failed after %d %s: %s", r.peerName(), docs, plural(docs, "doc", "docs"), safe(err.Error()))}
}
