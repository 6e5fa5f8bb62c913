package main

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/livesync-go/livesync-go/adapters/p2p"
)

const p2pUsage = `usage: livesync p2p <command> [flags]

commands:
  id       print this device's peer id (the other devices approve it)
  peers    look for the group's peers for --wait, and list them
  pending  the peers that knocked and are not approved (--wait: look first)
  approve  approve a peer: p2p approve PEERID [--device NAME]
  revoke   withdraw a peer's approval: p2p revoke PEERID
  host     serve the local replica to the approved peers and sync with
           them as they come and go, until Ctrl-C
  sync     sync once with every approved peer found within --wait

The devices of a sync group find each other through Nostr relays (--nostr,
or nostr_relays in the configuration's [p2p] table), in a room sealed with
the group passphrase ($LIVESYNC_P2P_PASSPHRASE, else the vault
passphrase), and sync directly with the peers each approved. The identity
(p2p-identity.key) and the peer book (p2p-peers.json) live beside the
local replica. "livesync sync p2p://GROUP" syncs with the group's approved
peers as with any remote.
Run "livesync p2p <command> -h" for the flags of a command.
`

// p2pCommands are the subcommands of "livesync p2p".
var p2pCommands = map[string]func(*cliEnv, []string) error{
	"id":      runP2PID,
	"peers":   runP2PPeers,
	"pending": runP2PPending,
	"approve": runP2PApprove,
	"revoke":  runP2PRevoke,
	"host":    runP2PHost,
	"sync":    runP2PSync,
}

func runP2P(env *cliEnv, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(env.stderr, p2pUsage)
		if len(args) == 0 {
			return usageError{"p2p needs a command (id, peers, pending, approve, revoke, host, sync)"}
		}
		return nil
	}
	cmd, ok := p2pCommands[args[0]]
	if !ok {
		return usageError{fmt.Sprintf("unknown p2p command %q: use id, peers, pending, approve, revoke, host or sync", args[0])}
	}
	env.cmd = "p2p " + args[0]
	return cmd(env, args[1:])
}

// replicaDir is the folder of the local replica, which holds the
// identity and the peer book. It opens nothing, so that approve and
// revoke work while "p2p host" holds the replica.
func (c *command) replicaDir() (string, error) {
	path, err := c.storePath()
	if err != nil {
		return "", err
	}
	return filepath.Dir(path), nil
}

func runP2PID(env *cliEnv, args []string) error {
	c := env.newCommand("p2p id", "p2p id [flags]")
	if err := c.parse(args); err != nil {
		return err
	}
	if len(c.pos) > 0 {
		return usageError{"p2p id takes no arguments"}
	}
	dir, err := c.replicaDir()
	if err != nil {
		return err
	}
	id, err := p2pIdentity(dir)
	if err != nil {
		return err
	}
	if c.json {
		writeJSON(env.stdout, map[string]any{"ok": true, "command": "p2p id", "peer_id": id.String()})
		return nil
	}
	fmt.Fprintln(env.stdout, id)
	return nil
}

// parsePeerArg parses the PEERID argument of approve and revoke.
func parsePeerArg(c *command, verb string) (peer.ID, error) {
	if len(c.pos) != 1 {
		return "", usageError{fmt.Sprintf("p2p %s takes one peer id (livesync p2p peers or p2p pending list them)", verb)}
	}
	id, err := peer.Decode(c.pos[0])
	if err != nil {
		return "", usageError{fmt.Sprintf("%q is not a peer id (livesync p2p peers or p2p pending list them)", c.pos[0])}
	}
	return id, nil
}

func runP2PApprove(env *cliEnv, args []string) error {
	c := env.newCommand("p2p approve", "p2p approve PEERID [--device NAME] [flags]")
	device := c.fs.String("device", "", "the name to know the peer by (default: the name it announces)")
	if err := c.parse(args); err != nil {
		return err
	}
	id, err := parsePeerArg(c, "approve")
	if err != nil {
		return err
	}
	dir, err := c.replicaDir()
	if err != nil {
		return err
	}
	if own, err := p2pIdentity(dir); err == nil && own == id {
		return usageError{"that is this device's own peer id: approve it on the other devices"}
	}
	book, err := openPeerBook(dir)
	if err != nil {
		return err
	}
	name := *device
	if name == "" {
		for _, e := range append(book.Pending(), book.Approved()...) {
			if e.ID == id {
				name = e.Device
			}
		}
	}
	if err := book.Approve(id, name); err != nil {
		return &localError{filepath.Join(dir, p2p.PeerBookFileName), err}
	}
	if c.json {
		writeJSON(env.stdout, map[string]any{"ok": true, "command": "p2p approve", "peer_id": id.String(), "device": name})
		return nil
	}
	fmt.Fprintf(env.stdout, "approved %s%s; a running livesync p2p host serves it within 2 s\n", id, deviceSuffix(name))
	return nil
}

func runP2PRevoke(env *cliEnv, args []string) error {
	c := env.newCommand("p2p revoke", "p2p revoke PEERID [flags]")
	if err := c.parse(args); err != nil {
		return err
	}
	id, err := parsePeerArg(c, "revoke")
	if err != nil {
		return err
	}
	dir, err := c.replicaDir()
	if err != nil {
		return err
	}
	book, err := openPeerBook(dir)
	if err != nil {
		return err
	}
	name, approved := "", false
	for _, e := range book.Approved() {
		if e.ID == id {
			name, approved = e.Device, true
		}
	}
	if !approved {
		return usageError{fmt.Sprintf("peer %s is not approved here (livesync p2p peers lists the approved ones)", id)}
	}
	if err := book.Revoke(id); err != nil {
		return &localError{filepath.Join(dir, p2p.PeerBookFileName), err}
	}
	if c.json {
		writeJSON(env.stdout, map[string]any{"ok": true, "command": "p2p revoke", "peer_id": id.String(), "device": name})
		return nil
	}
	fmt.Fprintf(env.stdout, "revoked %s%s; a running livesync p2p host closes its connections within 2 s\n", id, deviceSuffix(name))
	return nil
}

func deviceSuffix(name string) string {
	if name == "" {
		return ""
	}
	return " (" + safe(name) + ")"
}

// lookAround joins the group without serving, for set.wait (the group
// notes the unapproved peers it hears of as pending); it returns the
// peers the group knows.
func (c *command) lookAround(f p2pFlags, set p2pSettings) (own peer.ID, book *p2p.PeerBook, seen []p2p.PeerStatus, err error) {
	pass, err := c.groupPassphrase(f, nil)
	if err != nil {
		return "", nil, nil, err
	}
	s, err := c.joinGroup(set, pass, nil)
	if err != nil {
		return "", nil, nil, err
	}
	defer s.Close()
	if !c.cf.quiet {
		fmt.Fprintf(c.stderr, "looking for the peers of group %s for %s\n", safe(set.group), set.wait)
	}
	select {
	case <-c.ctx.Done():
	case <-time.After(set.wait):
	}
	if err := c.ctx.Err(); err != nil {
		return "", nil, nil, err
	}
	return s.id, s.book, s.group.Peers(), nil
}

func runP2PPeers(env *cliEnv, args []string) error {
	c := env.newCommand("p2p peers", "p2p peers [--group NAME] [--wait 10s] [flags]")
	var f p2pFlags
	addP2PFlags(c.fs, &f, true)
	if err := c.parse(args); err != nil {
		return err
	}
	if len(c.pos) > 0 {
		return usageError{"p2p peers takes no arguments (name the group with --group)"}
	}
	set, err := c.p2pSettings(f, "", true)
	if err != nil {
		return err
	}
	own, book, seen, err := c.lookAround(f, set)
	if err != nil {
		return err
	}
	rows := peerRows(seen, book.Approved(), book.Pending())
	if c.json {
		writeJSON(env.stdout, map[string]any{"ok": true, "command": "p2p peers", "group": set.group, "peer_id": own.String(),
			"device": set.device, "peers": peerRowsJSON(rows)})
		return nil
	}
	fmt.Fprintf(env.stdout, "this device: %s (%s)\n", own, safe(set.device))
	if len(rows) == 0 {
		fmt.Fprintf(env.stdout, "no peer of group %s answered within %s (check that the other devices run livesync p2p host, share the group passphrase, and the Nostr relays)\n", safe(set.group), set.wait)
		return nil
	}
	return printPeerRows(env, rows)
}

// peerRow is one line of "p2p peers".
type peerRow struct {
	id       peer.ID
	device   string
	approved bool
	online   bool
	addrs    []string
}

// peerRows merges the peers seen with the book's approved and pending
// ones, approved first, then by device name.
func peerRows(seen []p2p.PeerStatus, approved, pending []p2p.PeerEntry) []peerRow {
	byID := map[peer.ID]*peerRow{}
	for _, e := range approved {
		byID[e.ID] = &peerRow{id: e.ID, device: e.Device, approved: true, addrs: e.Addrs}
	}
	for _, e := range pending {
		if byID[e.ID] == nil {
			byID[e.ID] = &peerRow{id: e.ID, device: e.Device, addrs: e.Addrs}
		}
	}
	for _, s := range seen {
		r := byID[s.ID]
		if r == nil {
			r = &peerRow{id: s.ID}
			byID[s.ID] = r
		}
		r.online, r.approved = r.online || s.Present, r.approved || s.Approved
		r.device = cmpOr(r.device, s.Device)
		if len(s.Addrs) > 0 {
			r.addrs = s.Addrs
		}
	}
	rows := make([]peerRow, 0, len(byID))
	for _, r := range byID {
		rows = append(rows, *r)
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].approved != rows[j].approved {
			return rows[i].approved
		}
		if rows[i].device != rows[j].device {
			return rows[i].device < rows[j].device
		}
		return rows[i].id < rows[j].id
	})
	return rows
}

func peerRowsJSON(rows []peerRow) []map[string]any {
	out := make([]map[string]any, 0, len(rows))
	for _, r := range rows {
		addrs := r.addrs
		if addrs == nil {
			addrs = []string{}
		}
		out = append(out, map[string]any{"peer_id": r.id.String(), "device": r.device, "approved": r.approved,
			"online": r.online, "addrs": addrs})
	}
	return out
}

func printPeerRows(env *cliEnv, rows []peerRow) error {
	tw := tabwriter.NewWriter(env.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PEER\tDEVICE\tSTATUS\tSEEN\tADDRESSES")
	pending := false
	for _, r := range rows {
		status, seen := "approved", "not seen"
		if !r.approved {
			status, pending = "pending", true
		}
		if r.online {
			seen = "online"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.id, safe(cmpOr(r.device, "-")), status, seen, safe(cmpOr(strings.Join(r.addrs, " "), "-")))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if pending {
		fmt.Fprintln(env.stdout, "approve a pending peer with: livesync p2p approve PEERID")
	}
	return nil
}

func runP2PPending(env *cliEnv, args []string) error {
	c := env.newCommand("p2p pending", "p2p pending [--wait 10s] [flags]")
	var f p2pFlags
	addP2PFlags(c.fs, &f, true)
	if err := c.parse(args); err != nil {
		return err
	}
	if len(c.pos) > 0 {
		return usageError{"p2p pending takes no arguments"}
	}
	look := flagSet(c.fs, "wait")
	set, err := c.p2pSettings(f, "", look)
	if err != nil {
		return err
	}
	var book *p2p.PeerBook
	if look {
		if _, book, _, err = c.lookAround(f, set); err != nil {
			return err
		}
	} else if book, err = openPeerBook(set.dir); err != nil {
		return err
	}
	pending := book.Pending()
	if c.json {
		rows := make([]map[string]any, 0, len(pending))
		for _, e := range pending {
			rows = append(rows, map[string]any{"peer_id": e.ID.String(), "device": e.Device, "addrs": nonNil(e.Addrs),
				"since": timeJSON(e.Since), "last_seen": timeJSON(e.LastSeen)})
		}
		writeJSON(env.stdout, map[string]any{"ok": true, "command": "p2p pending", "pending": rows})
		return nil
	}
	if len(pending) == 0 {
		fmt.Fprintln(env.stdout, "no pending peer: no unapproved device asked to sync")
		return nil
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PEER\tDEVICE\tFIRST SEEN\tLAST SEEN")
	for _, e := range pending {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.ID, safe(cmpOr(e.Device, "-")), localTime(e.Since), localTime(e.LastSeen))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(env.stdout, "approve one with: livesync p2p approve PEERID")
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func localTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}
