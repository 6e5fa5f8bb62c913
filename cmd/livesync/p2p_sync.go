package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/schollz/progressbar/v3"

	"github.com/livesync-go/livesync-go/adapters/p2p"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/replicate"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// exitError is a failure with its own exit code and line.
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }

// refuseP2P is the error of a command that cannot work with a group's
// peers.
func refuseP2P(spec remoteSpec, cmd string) error {
	if cmd == "" {
		cmd = "this command"
	}
	return usageError{fmt.Sprintf("%s cannot use %s: the peers of a sync group are reached with pull, push, sync and hunt --retry (and the livesync p2p commands); "+
		"a peer's database is rebuilt, unlocked or examined on that device itself", cmd, spec)}
}

// p2pRun is one run with the approved peers of a group: "p2p sync",
// "p2p host", and pull, push or sync of a p2p://GROUP remote.
type p2pRun struct {
	*command
	f     p2pFlags
	spec  remoteSpec // kind "p2p"
	dir   replicate.Direction
	name  string // the command's name in its JSON answer
	live  bool
	serve bool // serve the replica to the approved peers (host)
	// serving: the replica is served (host, or sync --watch of a
	// replica that holds a vault: both ways, live, is what a host does).
	serving  bool
	newVault vaultConfig

	set   p2pSettings
	sess  *p2pSession
	mu    sync.Mutex
	peers []peerOutcome // one-shot: each peer's outcome, in order
	// lastFailure is the last failure printed for each peer of a live
	// run (SyncVault never overlaps its OnPeer calls).
	lastFailure map[peer.ID]string
}

// peerOutcome is what the sync with one peer did.
type peerOutcome struct {
	id     peer.ID
	device string
	res    vault.SyncResult
	err    error
}

// p2pSpec is the remote spec of a group named by --group or [p2p].
func (c *command) p2pSpec(f p2pFlags) (remoteSpec, error) {
	set, err := c.p2pSettings(f, "", true)
	if err != nil {
		return remoteSpec{}, err
	}
	return remoteSpec{kind: "p2p", group: set.group, id: "p2p://" + set.group}, nil
}

func runP2PSync(env *cliEnv, args []string) error {
	c := env.newCommand("p2p sync", "p2p sync [--group NAME] [--wait 10s] [flags]")
	r := &p2pRun{command: c, dir: replicate.Sync, name: "p2p sync"}
	addP2PFlags(c.fs, &r.f, true)
	if err := c.parse(args); err != nil {
		return err
	}
	if len(c.pos) > 0 {
		return usageError{"p2p sync takes no arguments (name the group with --group)"}
	}
	var err error
	if r.spec, err = c.p2pSpec(r.f); err != nil {
		return err
	}
	return r.run()
}

func runP2PHost(env *cliEnv, args []string) error {
	c := env.newCommand("p2p host", "p2p host [--group NAME] [--listen MULTIADDR] [flags]")
	r := &p2pRun{command: c, dir: replicate.Sync, name: "p2p host", live: true, serve: true}
	addP2PFlags(c.fs, &r.f, true)
	if err := c.parse(args); err != nil {
		return err
	}
	if len(c.pos) > 0 {
		return usageError{"p2p host takes no arguments (name the group with --group)"}
	}
	var err error
	if r.spec, err = c.p2pSpec(r.f); err != nil {
		return err
	}
	return r.run()
}

// checkP2P checks the flags of pull, push or sync against the kind of
// remote: the p2p flags need a p2p:// remote, which in turn takes no
// --metadata-only, --rebuild or --interval.
func (r *replication) checkP2P() error {
	if r.spec.kind != "p2p" {
		if set := r.p2p.setFlags(r.fs); len(set) > 0 {
			return usageError{fmt.Sprintf("%s %s only to p2p://GROUP remotes", strings.Join(set, ", "), plural(len(set), "applies", "apply"))}
		}
		return nil
	}
	switch {
	case r.metadataOnly:
		return usageError{"--metadata-only is not supported with p2p:// remotes: peers send documents with their chunks"}
	case r.rebuild:
		return refuseP2P(r.spec, "push --rebuild")
	case flagSet(r.fs, "interval"):
		return usageError{"--interval applies to journal buckets (s3://) only: peers are followed through their changes feeds"}
	}
	return nil
}

// runP2P is pull, push or sync of a p2p:// remote.
func (r *replication) runP2P() error {
	run := &p2pRun{command: r.command, f: r.p2p, spec: r.spec, dir: r.dir, name: r.name, live: r.watch,
		newVault: r.vf.config(r.fs)}
	return run.run()
}

// run joins the group and syncs with its approved peers: once, or until
// Ctrl-C when live.
func (r *p2pRun) run() error {
	r.lastFailure = map[peer.ID]string{}
	var err error
	if r.set, err = r.p2pSettings(r.f, r.spec.group, true); err != nil {
		return err
	}
	rep, err := r.replica(!r.serve)
	if err != nil {
		return err
	}
	defer rep.Close()
	cfg, err := r.config()
	if err != nil {
		return err
	}
	dev := deviceInfoFor(cfg.DeviceName, rep, r.spec)
	if r.serve && !rep.v.HasVault() {
		return fmt.Errorf("the local replica %s holds no vault yet, so there is nothing to serve: put a file, pull from a remote, or sync from a peer of the group (livesync sync p2p://%s)", rep.path, r.set.group)
	}
	var served *p2p.Served
	r.serving = r.serve || (r.live && r.dir == replicate.Sync && rep.v.HasVault())
	if r.serving {
		settings, err := r.localVault(rep)
		if err != nil {
			return err
		}
		served = p2p.ServedVault(rep.v, r.set.group, settings)
		if err := r.joinServed(rep, served, dev); err != nil {
			return err
		}
	}
	pass, err := r.groupPassphrase(r.f, &r.spec)
	if err != nil {
		return err
	}
	if r.sess, err = r.joinGroup(r.set, pass, served); err != nil {
		return err
	}
	defer r.sess.Close()
	r.header(rep)
	stopEvents := r.sess.group.Watch(r.peerEvent)
	defer stopEvents()
	stopProgress := r.showPeerSyncs(rep)
	spec := r.spec
	o := p2p.VaultSyncOptions{Direction: r.dir, Live: r.live, Wait: r.set.wait, Hunt: true, OnPeer: r.onPeer,
		Attach: vault.AttachOptions{Create: true, Device: &dev, NewVault: newVaultOf(spec, r.newVault),
			Passphrase: func() (string, error) { return r.passphraseFor(&spec, r.cf) },
			Admit:      func(_ context.Context, l vault.Locked) (bool, error) { return r.admit(spec, l) }}}
	if r.live {
		stopWatch := r.watchBook()
		defer stopWatch()
	}
	start := r.now()
	res, err := p2p.SyncVault(r.ctx, rep.v, r.sess.group, o)
	stopProgress()
	return r.outcome(res, err, r.now().Sub(start))
}

// outcome turns what SyncVault returned into the command's answer: a
// live run ends with Ctrl-C, a one-shot one reports each peer.
func (r *p2pRun) outcome(res p2p.VaultSyncResult, err error, elapsed time.Duration) error {
	if r.live {
		if r.ctx.Err() != nil {
			fmt.Fprintln(r.stderr, "stopped")
			return nil
		}
		return r.wrapErr(err)
	}
	switch {
	case r.ctx.Err() != nil:
		return r.ctx.Err()
	case errors.Is(err, p2p.ErrNoPeerFound):
		return r.noPeerError()
	case errors.Is(err, p2p.ErrNoApprovedPeers):
		r.listUnapproved()
		return exitError{exitRefused, fmt.Sprintf("this device approves no peer of group %s yet: approve the other devices first (livesync p2p approve PEERID; livesync p2p peers lists them)", safe(r.set.group))}
	case err != nil && len(res.Peers) > 0:
		// the peers synced; the hunt after them failed
		_, msg := classify(r.wrapErr(err))
		fmt.Fprintf(r.stderr, "warning: %s\n", safe(msg))
	case err != nil && len(res.Failed) == 0:
		return r.wrapErr(err)
	}
	return r.report(res, elapsed)
}

// wrapErr names the group in an error of the group as a whole.
func (r *p2pRun) wrapErr(err error) error {
	if err == nil || errors.Is(err, context.Canceled) {
		return err
	}
	var le *localError
	var ue usageError
	if errors.As(err, &le) || errors.As(err, &ue) {
		return err
	}
	return &remoteError{remote: r.spec.String(), err: remoteErr(err)}
}

// header says what the run does.
func (r *p2pRun) header(rep *replica) {
	if r.cf.quiet {
		return
	}
	who := fmt.Sprintf("as %s (%s)", r.sess.id, safe(r.set.device))
	switch {
	case r.serve:
		fmt.Fprintf(r.stderr, "serving %s to the approved peers of group %s %s; Ctrl-C to stop\n", safe(rep.path), safe(r.set.group), who)
	case r.live && r.serving:
		fmt.Fprintf(r.stderr, "watching the approved peers of group %s (%s) and serving %s to them %s; Ctrl-C to stop\n", safe(r.set.group), r.dir, safe(rep.path), who)
	case r.live:
		fmt.Fprintf(r.stderr, "watching the approved peers of group %s (%s) %s; Ctrl-C to stop\n", safe(r.set.group), r.dir, who)
	default:
		fmt.Fprintf(r.stderr, "looking for the approved peers of group %s for %s %s\n", safe(r.set.group), r.set.wait, who)
	}
	if r.live {
		var addrs []string
		for _, a := range r.sess.host.Addrs() {
			addrs = append(addrs, a.String())
		}
		fmt.Fprintf(r.stderr, "listening on %s\n", strings.Join(addrs, " "))
	}
}

// deviceOf is the device name of a peer as the group knows it.
func (r *p2pRun) deviceOf(id peer.ID) string {
	for _, p := range r.sess.group.Peers() {
		if p.ID == id {
			return p.Device
		}
	}
	for _, e := range r.sess.book.Approved() {
		if e.ID == id {
			return e.Device
		}
	}
	return ""
}

// peerEvent prints a change in the group (live runs), and notes
// unapproved peers as pending.
func (r *p2pRun) peerEvent(e p2p.PeerEvent) {
	id, dev := e.Peer.ID, deviceSuffix(e.Peer.Device)
	if !r.live || r.cf.quiet {
		return
	}
	switch e.Kind {
	case p2p.PeerFound:
		fmt.Fprintf(r.stderr, "peer %s%s found\n", id, dev)
	case p2p.PeerLost:
		fmt.Fprintf(r.stderr, "peer %s%s left\n", id, dev)
	case p2p.PeerPending:
		fmt.Fprintf(r.stderr, "peer %s%s is not approved and asks to sync; approve it with: livesync p2p approve %s\n", id, dev, id)
	case p2p.PeerApproved:
		fmt.Fprintf(r.stderr, "peer %s%s approved\n", id, dev)
	case p2p.PeerRevoked:
		fmt.Fprintf(r.stderr, "peer %s%s revoked; its connections were closed\n", id, dev)
	}
}

// onPeer records (one-shot) or prints (live) each peer's outcome.
func (r *p2pRun) onPeer(id peer.ID, res vault.SyncResult, err error) {
	o := peerOutcome{id: id, device: r.deviceOf(id), res: res, err: err}
	if !r.live {
		r.mu.Lock()
		r.peers = append(r.peers, o)
		r.mu.Unlock()
		return
	}
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return
		}
		_, msg := r.peerFailure(o)
		if r.lastFailure[id] != msg { // a peer retried for the same reason is told once
			r.lastFailure[id] = msg
			fmt.Fprintln(r.stderr, safe(msg))
		}
		return
	}
	delete(r.lastFailure, id)
	if !r.cf.quiet {
		fmt.Fprintf(r.stderr, "syncing live with peer %s%s\n", id, deviceSuffix(o.device))
	}
}

// peerLine is the line of a peer synced with.
func (r *p2pRun) peerLine(o peerOutcome) string {
	var parts []string
	if r.dir&replicate.Pull != 0 {
		parts = append(parts, fmt.Sprintf("pulled %d", o.res.Pull.DocsWritten))
	}
	if r.dir&replicate.Push != 0 {
		parts = append(parts, fmt.Sprintf("pushed %d", o.res.Push.DocsWritten))
	}
	n := o.res.Pull.DocsWritten + o.res.Push.DocsWritten
	return fmt.Sprintf("synced with peer %s%s: %s %s", o.id, deviceSuffix(o.device), strings.Join(parts, ", "), plural(n, "doc", "docs"))
}

// peerFailure is the exit code and line of a peer's failure. A peer
// that does not serve this device answers with a refusal.
func (r *p2pRun) peerFailure(o peerOutcome) (int, string) {
	if refusedByPeer(o.err) {
		return exitRefused, fmt.Sprintf("peer %s%s refused: this device is not approved there; on that device run `livesync p2p approve %s`", o.id, deviceSuffix(o.device), r.sess.id)
	}
	if strings.Contains(o.err.Error(), "protocols not supported") {
		return exitUnreachable, fmt.Sprintf("peer %s%s serves no vault (it is not running livesync p2p host)", o.id, deviceSuffix(o.device))
	}
	return classify(&remoteError{remote: "p2p://" + r.set.group + "/" + o.id.String(), err: remoteErr(o.err)})
}

// refusedByPeer reports a peer's refusal to serve this device (it has
// not approved it): the adapter's ErrRefused, an authentication error.
func refusedByPeer(err error) bool {
	var ee *engine.Error
	return errors.Is(err, p2p.ErrRefused) || (errors.As(err, &ee) && ee.Stage == engine.StageAuth)
}

// noPeerError is the failure of a one-shot run that met no approved
// peer; it lists the unapproved peers it saw.
func (r *p2pRun) noPeerError() error {
	r.listUnapproved()
	return exitError{exitUnreachable, fmt.Sprintf("no approved peer of group %s answered within %s (check that the other devices run `livesync p2p host`, share the group passphrase, and the Nostr relays)",
		safe(r.set.group), r.set.wait)}
}

// listUnapproved names the unapproved peers the group heard of.
func (r *p2pRun) listUnapproved() {
	for _, p := range r.sess.group.Peers() {
		if !p.Approved && p.Present {
			fmt.Fprintf(r.stderr, "found peer %s%s, which this device has not approved: livesync p2p approve %s\n", p.ID, deviceSuffix(p.Device), p.ID)
		}
	}
}

// report prints a one-shot run's outcome per peer and as a whole.
func (r *p2pRun) report(res p2p.VaultSyncResult, elapsed time.Duration) error {
	r.mu.Lock()
	outcomes := append([]peerOutcome(nil), r.peers...)
	r.mu.Unlock()
	outcomes = mergeOutcomes(outcomes, res, r.deviceOf)
	if len(outcomes) == 0 {
		return r.noPeerError()
	}
	var fails []string
	code := exitOK
	rows := make([]map[string]any, 0, len(outcomes))
	for _, o := range outcomes {
		row := map[string]any{"peer_id": o.id.String(), "device": o.device, "ok": o.err == nil}
		if o.err != nil {
			c, msg := r.peerFailure(o)
			code = cmpCode(code, c)
			fails = append(fails, msg)
			row["error"], row["exit_code"] = msg, c
		} else {
			row["pulled"], row["pushed"] = progressJSON(o.res.Pull), progressJSON(o.res.Push)
			if !r.cf.json {
				fmt.Fprintln(r.stdout, safe(r.peerLine(o)))
			}
		}
		rows = append(rows, row)
	}
	if r.cf.json {
		writeJSON(r.stdout, map[string]any{"ok": len(fails) == 0 && len(res.Hunt.Held) == 0, "command": r.name, "remote": r.spec.String(),
			"group": r.set.group, "peer_id": r.sess.id.String(), "peers": rows, "held": len(res.Hunt.Held), "elapsed_ms": elapsed.Milliseconds()})
	}
	switch {
	case len(fails) == 1 && len(outcomes) == 1:
		return exitError{code, fails[0]}
	case len(fails) > 0:
		for _, f := range fails {
			fmt.Fprintln(r.stderr, safe(f))
		}
		return exitError{code, fmt.Sprintf("%d of %d approved peers of group %s failed (see above)", len(fails), len(outcomes), safe(r.set.group))}
	case len(res.Hunt.Held) > 0:
		n := len(res.Hunt.Held)
		return partialError{msg: fmt.Sprintf("%d %s still held: no peer had all of %s chunks (livesync hunt lists them)", n, plural(n, "file is", "files are"), plural(n, "its", "their"))}
	}
	if !r.cf.json && !r.cf.quiet {
		fmt.Fprintf(r.stderr, "synced with %d %s of group %s in %.1f s\n", len(outcomes), plural(len(outcomes), "peer", "peers"), safe(r.set.group), elapsed.Seconds())
	}
	return nil
}

// mergeOutcomes adds the peers of res that OnPeer did not report.
func mergeOutcomes(got []peerOutcome, res p2p.VaultSyncResult, deviceOf func(peer.ID) string) []peerOutcome {
	have := map[peer.ID]bool{}
	for _, o := range got {
		have[o.id] = true
	}
	for _, id := range res.Peers {
		if !have[id] {
			have[id] = true
			got = append(got, peerOutcome{id: id, device: deviceOf(id)})
		}
	}
	for id, err := range res.Failed {
		if !have[id] {
			have[id] = true
			got = append(got, peerOutcome{id: id, device: deviceOf(id), err: err})
		}
	}
	return got
}

// cmpCode keeps the first failure's exit code.
func cmpCode(have, c int) int {
	if have != exitOK {
		return have
	}
	return c
}

// showPeerSyncs prints the progress of the syncs with the group's peers
// on stderr: plain lines, each with the peer's short id, or on a
// terminal a bar per one-shot sync (a one-shot run syncs with one peer
// at a time) under a line naming the peer.
func (r *p2pRun) showPeerSyncs(rep *replica) (stop func()) {
	if r.cf.quiet {
		return func() {}
	}
	prefix := "p2p://" + r.set.group + "/"
	var mu sync.Mutex
	prs := map[string]*progress{}
	var current *progress // the one-shot bar
	end := rep.v.Watch(r.ctx, func(e vault.Event) {
		if !strings.HasPrefix(e.Remote, prefix) {
			return
		}
		mu.Lock()
		p := prs[e.Remote]
		if p == nil || e.Kind == vault.SyncStarted {
			p = r.peerProgress(strings.TrimPrefix(e.Remote, prefix))
			prs[e.Remote] = p
			if p.bar {
				if current != nil {
					current.finish()
				}
				current = p
			}
		}
		mu.Unlock()
		switch {
		case e.Kind == vault.SyncProgress && !r.live && e.Sync != nil:
			p.update(*e.Sync)
		case e.Kind == vault.SyncWritten && r.live:
			p.written(e.Direction, e.Written)
		case e.Kind == vault.HuntFound:
			fmt.Fprintf(r.stderr, "found %d/%d missing chunks on the peers\n", e.Hunt.Found, e.Hunt.Total)
		}
	})
	return func() {
		end()
		mu.Lock()
		defer mu.Unlock()
		if current != nil {
			current.finish()
		}
	}
}

// peerProgress is the progress of one sync with the peer id: a bar on a
// terminal for a one-shot run, else lines prefixed with the peer's short
// id.
func (r *p2pRun) peerProgress(id string) *progress {
	short := "peer …" + tail(id, 8)
	if r.stderrTerminal && !r.live {
		fmt.Fprintf(r.stderr, "%s\n", short)
		return newProgress(r.cliEnv, false, false)
	}
	return &progress{w: &prefixWriter{w: r.stderr, prefix: short + ": "}, live: r.live,
		bars: map[replicate.Direction]*progressbar.ProgressBar{}, last: map[replicate.Direction]replicate.Progress{},
		printed: map[replicate.Direction]bool{}}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// prefixWriter writes each line with a prefix.
type prefixWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	lines := strings.SplitAfter(string(b), "\n")
	var out strings.Builder
	for _, l := range lines {
		if l != "" {
			out.WriteString(p.prefix + l)
		}
	}
	if _, err := io.WriteString(p.w, out.String()); err != nil {
		return 0, err
	}
	return len(b), nil
}

// watchBook prints the group's status line every 2 s when it changed
// (the group itself re-reads the peer book that approve and revoke edit
// from another process).
func (r *p2pRun) watchBook() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		last := ""
		for {
			select {
			case <-done:
				return
			case <-r.ctx.Done():
				return
			case <-t.C:
			}
			if line := r.statusLine(); line != last && !r.cf.quiet {
				fmt.Fprintln(r.stderr, line)
				last = line
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// statusLine is the one-line state of the group.
func (r *p2pRun) statusLine() string {
	approved, online, pending := len(r.sess.book.Approved()), 0, len(r.sess.book.Pending())
	var c p2p.PeerCounters
	var names []string
	for _, p := range r.sess.group.Peers() {
		if p.Approved && p.Present {
			online++
			names = append(names, cmpOr(p.Device, shortID(p.ID)))
		}
		c.DocsIn += p.Counters.DocsIn
		c.DocsOut += p.Counters.DocsOut
	}
	who := ""
	if len(names) > 0 {
		who = " (" + safe(strings.Join(names, ", ")) + ")"
	}
	return fmt.Sprintf("group %s: %d of %d approved %s present%s, %d pending; %d docs received, %d served",
		safe(r.set.group), online, approved, plural(approved, "peer", "peers"), who, pending, c.DocsIn, c.DocsOut)
}
