package main

import (
	"fmt"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/livesync-go/livesync-go/engine/docid"
	"github.com/livesync-go/livesync-go/engine/journalsync"
	"github.com/livesync-go/livesync-go/engine/store"
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
	ctx := env.ctx
	info, err := rep.st.Info(ctx)
	if err != nil {
		return err
	}
	all, err := rep.st.AllDocs(ctx, store.AllDocsOptions{})
	if err != nil {
		return err
	}
	// Each chunk document once, however many files use it.
	chunks := 0
	for _, d := range all {
		if docid.IsChunkID(d.ID) {
			chunks++
		}
	}
	files, err := localFiles(ctx, rep.st)
	if err != nil {
		return err
	}
	live, deleted, held := 0, 0, 0
	var heldPaths []string
	// A chunk that two held files share is one chunk to fetch: count
	// distinct ids, not each file's shortfall.
	missingIDs := map[string]bool{}
	for _, f := range files {
		if f.meta.Deleted {
			deleted++
			continue
		}
		live++
		if f.localChunks < f.chunks {
			held++
			heldPaths = append(heldPaths, f.meta.Path)
			ids := distinct(f.meta.Children)
			have, err := rep.st.GetChunks(ctx, ids)
			if err != nil {
				return err
			}
			for _, id := range ids {
				if _, ok := have[id]; !ok {
					missingIDs[id] = true
				}
			}
		}
	}
	missing := len(missingIDs)
	node, err := rep.nodeID(ctx)
	if err != nil {
		return err
	}
	vault := "none yet (pull from a remote, or put a file)"
	if rep.vault != nil {
		s, err := settingsOf(rep.vault.Tweaks)
		if err != nil {
			return err
		}
		vault = fmt.Sprintf("%s, chunk size %d", describeFlags(s.Encrypt, s.PathObfuscation), s.CustomChunkSize)
	}
	var remotes []string
	if rep.vault != nil {
		for id := range rep.vault.Remotes {
			remotes = append(remotes, id)
		}
	}
	sort.Strings(remotes)
	quarantined := map[string][]journalsync.Quarantine{}
	for _, id := range remotes {
		q, err := quarantinedPacks(ctx, rep.st, rep.vault.Remotes[id])
		if err != nil {
			return err
		}
		quarantined[id] = q
	}
	if c.cf.json {
		rs := map[string]any{}
		for _, id := range remotes {
			st := rep.vault.Remotes[id]
			r := map[string]any{"last_pull": timeJSON(st.LastPull), "last_pull_seq": st.LastPullSeq,
				"last_push": timeJSON(st.LastPush), "last_push_seq": st.LastPushSeq}
			if st.JournalID != "" {
				r["quarantined"] = quarantineJSON(quarantined[id])
			}
			rs[id] = r
		}
		writeJSON(env.stdout, map[string]any{"ok": true, "command": "status", "store": rep.path, "node_id": node,
			"vault": vault, "docs": info.DocCount, "chunks": chunks, "files": live, "deleted_files": deleted,
			"held_files": held, "missing_chunks": missing, "held": heldPaths, "remotes": rs})
		return nil
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "store\t%s\n", safe(rep.path))
	fmt.Fprintf(tw, "vault\t%s\n", vault)
	fmt.Fprintf(tw, "device\t%s\n", safe(node))
	fmt.Fprintf(tw, "documents\t%d (%d files, %d deleted files, %d chunks)\n", info.DocCount, live, deleted, chunks)
	if held > 0 {
		fmt.Fprintf(tw, "held\t%d %s wait for %d %s (livesync hunt says which; hunt --retry or cat --remote fetches them)\n", held, plural(held, "file", "files"), missing, plural(missing, "chunk", "chunks"))
	} else {
		fmt.Fprintf(tw, "held\tnone: every file's chunks are local\n")
	}
	for _, id := range remotes {
		st := rep.vault.Remotes[id]
		fmt.Fprintf(tw, "remote\t%s\n", safe(id))
		unit := "sequence"
		if st.JournalID != "" {
			unit = "pack"
		}
		fmt.Fprintf(tw, "  last pull\t%s\n", when(st.LastPull, unit, st.LastPullSeq))
		fmt.Fprintf(tw, "  last push\t%s\n", when(st.LastPush, unit, st.LastPushSeq))
		if st.JournalID == "" {
			continue
		}
		if len(quarantined[id]) == 0 {
			fmt.Fprintf(tw, "  quarantined\tnone\n")
			continue
		}
		fmt.Fprintf(tw, "  quarantined\t%d %s (livesync pull --retry-quarantined tries them again)\n", len(quarantined[id]), plural(len(quarantined[id]), "pack", "packs"))
		for _, q := range quarantined[id] {
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
