package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/livesync-go/livesync-go/adapters/p2p"
	"github.com/livesync-go/livesync-go/engine/vault"
)

func runStatus(env *cliEnv, args []string) error {
	c := env.newCommand("status", "status [flags]")
	if err := c.parse(args); err != nil {
		return err
	}
	if len(c.pos) > 0 {
		return usageError{"status takes no arguments"}
	}
	rep, err := c.replica(false)
	if err != nil {
		return err
	}
	defer rep.Close()
	st, err := gatherStatus(env.ctx, rep)
	if err != nil {
		return err
	}
	dir, err := c.replicaDir()
	if err != nil {
		return err
	}
	st.p2p = gatherP2PStatus(dir)
	if c.cf.json {
		rs := map[string]any{}
		for _, id := range st.remoteIDs {
			r := st.Remotes[id]
			row := map[string]any{"last_pull": timeJSON(r.LastPull), "last_pull_seq": r.LastPullSeq,
				"last_push": timeJSON(r.LastPush), "last_push_seq": r.LastPushSeq}
			if r.JournalID != "" {
				row["quarantined"] = quarantineJSON(r.Quarantined)
			}
			rs[id] = row
		}
		writeJSON(env.stdout, map[string]any{"ok": true, "command": "status", "store": rep.path, "node_id": st.node,
			"vault": st.vault, "docs": st.Docs, "chunks": st.Chunks, "files": st.Files, "deleted_files": st.Deleted,
			"held_files": len(st.HeldPaths), "missing_chunks": st.MissingChunks, "held": st.HeldPaths, "remotes": rs,
			"p2p": st.p2p.json()})
		return nil
	}
	return st.print(env.stdout, rep.path)
}

// replicaStatus is what status says of the local replica: the vault's
// status, the device's node id and the vault's settings.
type replicaStatus struct {
	vault.Status
	node, vault string
	remoteIDs   []string
	p2p         *p2pStatus // nil: the replica has no peer book
}

// gatherStatus reads the replica's counts, held files, vault settings and
// what it remembers of each remote.
func gatherStatus(ctx context.Context, rep *replica) (*replicaStatus, error) {
	vs, err := rep.v.Status(ctx)
	if err != nil {
		return nil, err
	}
	st := &replicaStatus{Status: vs, vault: "none yet (pull from a remote, or put a file)"}
	if st.node, err = rep.v.NodeID(ctx); err != nil {
		return nil, err
	}
	if rep.v.HasVault() {
		s, err := rep.v.Settings()
		if err != nil {
			return nil, err
		}
		st.vault = fmt.Sprintf("%s, chunk size %d", describeFlags(s.Encrypt, s.PathObfuscation), s.CustomChunkSize)
	}
	for id := range st.Remotes {
		st.remoteIDs = append(st.remoteIDs, id)
	}
	sort.Strings(st.remoteIDs)
	return st, nil
}

// print writes the status as a table.
func (st *replicaStatus) print(w io.Writer, path string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "store\t%s\n", safe(path))
	fmt.Fprintf(tw, "vault\t%s\n", st.vault)
	fmt.Fprintf(tw, "device\t%s\n", safe(st.node))
	fmt.Fprintf(tw, "documents\t%d (%d files, %d deleted files, %d chunks)\n", st.Docs, st.Files, st.Deleted, st.Chunks)
	if held := len(st.HeldPaths); held > 0 {
		fmt.Fprintf(tw, "held\t%d %s wait for %d %s (livesync hunt says which; hunt --retry or cat --remote fetches them)\n", held, plural(held, "file", "files"), st.MissingChunks, plural(st.MissingChunks, "chunk", "chunks"))
	} else {
		fmt.Fprintf(tw, "held\tnone: every file's chunks are local\n")
	}
	st.p2p.print(tw)
	for _, id := range st.remoteIDs {
		r := st.Remotes[id]
		fmt.Fprintf(tw, "remote\t%s\n", safe(id))
		unit := "sequence"
		if r.JournalID != "" {
			unit = "pack"
		}
		fmt.Fprintf(tw, "  last pull\t%s\n", when(r.LastPull, unit, r.LastPullSeq))
		fmt.Fprintf(tw, "  last push\t%s\n", when(r.LastPush, unit, r.LastPushSeq))
		if r.JournalID == "" {
			continue
		}
		qs := r.Quarantined
		if len(qs) == 0 {
			fmt.Fprintf(tw, "  quarantined\tnone\n")
			continue
		}
		fmt.Fprintf(tw, "  quarantined\t%d %s (livesync pull --retry-quarantined tries them again)\n", len(qs), plural(len(qs), "pack", "packs"))
		for _, q := range qs {
			fmt.Fprintf(tw, "\t  %s (%s, %s): %s\n", safe(q.Key), safe(q.Stage), q.At.Local().Format("2006-01-02 15:04:05"), safe(q.Err))
		}
	}
	return tw.Flush()
}

func when(t time.Time, unit, seq string) string {
	if t.IsZero() {
		return "never"
	}
	if seq == "" {
		return t.Local().Format("2006-01-02 15:04:05")
	}
	return fmt.Sprintf("%s (%s %s)", t.Local().Format("2006-01-02 15:04:05"), unit, safe(seq))
}

func timeJSON(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(time.RFC3339)
}

// p2pStatus is what status says of peer-to-peer sync, for a replica with
// a peer book beside it: this device's peer id (from its identity file,
// which status never creates) and the peers of the book.
type p2pStatus struct {
	peerID   string // "": no identity file yet
	idErr    error  // the identity file cannot be read
	bookErr  error  // the peer book cannot be read
	approved int
	pending  []p2p.PeerEntry
}

// gatherP2PStatus reads the identity and the peer book in dir without
// writing either; nil when dir holds no peer book.
func gatherP2PStatus(dir string) *p2pStatus {
	bookPath := filepath.Join(dir, p2p.PeerBookFileName)
	if _, err := os.Stat(bookPath); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	ps := &p2pStatus{}
	ps.peerID, ps.idErr = readPeerID(filepath.Join(dir, p2p.IdentityFileName))
	book, err := p2p.OpenPeerBook(bookPath)
	if err != nil {
		ps.bookErr = err
		return ps
	}
	ps.approved, ps.pending = len(book.Approved()), book.Pending()
	return ps
}

// readPeerID is the peer id of the identity file at path; "" when there
// is none. Unlike the p2p commands, it never creates one.
func readPeerID(path string) (string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	key, err := crypto.UnmarshalPrivateKey(b)
	if err != nil {
		return "", fmt.Errorf("not an identity key: %w", err)
	}
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return "", fmt.Errorf("not an identity key: %w", err)
	}
	return id.String(), nil
}

// print writes the peer-to-peer lines of the status table.
func (ps *p2pStatus) print(w io.Writer) {
	if ps == nil {
		return
	}
	switch {
	case ps.idErr != nil:
		fmt.Fprintf(w, "p2p peer id\tunreadable identity file (%s): %s\n", p2p.IdentityFileName, safe(ps.idErr.Error()))
	case ps.peerID == "":
		fmt.Fprintf(w, "p2p peer id\tnone yet (livesync p2p id creates it)\n")
	default:
		fmt.Fprintf(w, "p2p peer id\t%s\n", safe(ps.peerID))
	}
	if ps.bookErr != nil {
		fmt.Fprintf(w, "p2p peers\tunreadable peer book (%s): %s\n", p2p.PeerBookFileName, safe(ps.bookErr.Error()))
		return
	}
	n := len(ps.pending)
	fmt.Fprintf(w, "p2p peers\t%d approved, %d pending\n", ps.approved, n)
	for _, e := range ps.pending {
		fmt.Fprintf(w, "  pending\t%s%s (livesync p2p approve %s)\n", e.ID, deviceSuffix(e.Device), e.ID)
	}
}

// json is the "p2p" member of status --json (nil without a peer book).
func (ps *p2pStatus) json() any {
	if ps == nil {
		return nil
	}
	m := map[string]any{"peer_id": nilIfEmpty(ps.peerID), "approved": ps.approved}
	if ps.idErr != nil {
		m["identity_error"] = ps.idErr.Error()
	}
	if ps.bookErr != nil {
		m["peer_book_error"] = ps.bookErr.Error()
		m["approved"] = nil
		return m
	}
	pending := []map[string]any{}
	for _, e := range ps.pending {
		pending = append(pending, map[string]any{"peer_id": e.ID.String(), "device": e.Device})
	}
	m["pending"] = pending
	return m
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}
