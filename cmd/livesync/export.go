package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
)

func runExport(env *cliEnv, args []string) error {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	dumpPath := fs.String("dump", "", "LiveSync database dump to read (CouchDB _all_docs?include_docs=true JSON; - for stdin)")
	out := fs.String("out", "", "folder to write the vault's files into (created if missing)")
	passFile := fs.String("passphrase-file", "", "file holding the E2EE passphrase (default: $LIVESYNC_PASSPHRASE)")
	hidden := fs.Bool("hidden", false, "also write hidden files (Hidden File Sync documents, i:…)")
	deleted := fs.Bool("keep-deleted", false, "also write files that are marked deleted")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	if *dumpPath == "" || *out == "" {
		return usageError{"both --dump and --out are required"}
	}
	pass, err := env.passphrase(*passFile)
	if err != nil {
		return err
	}
	docs, local, err := readDumpFile(*dumpPath)
	if err != nil {
		return err
	}
	v, err := vaultOf(docs, local, pass)
	if err != nil {
		return err
	}
	codec, err := livesync.New(livesync.Config{Settings: v.settings, Salt: v.salt})
	if err != nil {
		return err
	}

	// Decode every document to its local form first: a wrong passphrase
	// shows at the first encrypted document, before anything is written.
	plain := make(map[string]livesync.Doc, len(docs))
	var files []livesync.Doc
	for _, d := range docs {
		pd, err := codec.DecodeRemote(d)
		if err != nil {
			if errors.Is(err, engine.ErrDecrypt) {
				return fmt.Errorf("%w (is the passphrase right?)", err)
			}
			return err
		}
		plain[pd.ID()] = pd
		if pd.IsFileDoc() {
			files = append(files, pd)
		}
	}
	get := func(id string) (string, error) {
		d, ok := plain[id]
		if !ok {
			return "", engine.ErrNotFound
		}
		c, err := livesync.ParseChunk(d)
		return c.Data, err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	written, skipped, failed := 0, 0, 0
	var bytes int64
	for _, d := range files {
		if err := env.ctx.Err(); err != nil {
			return err
		}
		meta, err := livesync.ParseMeta(d)
		if err != nil {
			fmt.Fprintf(env.stderr, "skip %s: %v\n", d.ID(), err)
			failed++
			continue
		}
		rel, ok := exportPath(meta.Path, *hidden)
		if !ok || (meta.Deleted && !*deleted) {
			skipped++
			continue
		}
		data, err := livesync.ReadFile(meta, get)
		if err != nil {
			fmt.Fprintf(env.stderr, "skip %s: %v\n", meta.ID, err)
			failed++
			continue
		}
		dst := filepath.Join(*out, filepath.FromSlash(rel))
		if err := writeFileAtomic(dst, data, meta.MTime); err != nil {
			fmt.Fprintf(env.stderr, "skip %s: %v\n", meta.ID, err)
			failed++
			continue
		}
		written++
		bytes += int64(len(data))
	}
	fmt.Fprintf(env.stdout, "exported %d files (%d bytes) to %s", written, bytes, *out)
	if skipped > 0 {
		fmt.Fprintf(env.stdout, "; skipped %d (deleted, hidden or not vault files)", skipped)
	}
	fmt.Fprintln(env.stdout)
	if failed > 0 {
		return partialError{failed: failed, total: len(files)}
	}
	return nil
}

// exportPath maps a document path to a safe relative file path. It refuses
// paths that would leave the output folder, and customisation-sync (ix:)
// and obsolete plugin (ps:) documents; hidden files (i:) only when asked.
func exportPath(p string, hidden bool) (string, bool) {
	switch {
	case strings.HasPrefix(p, "i:"):
		if !hidden {
			return "", false
		}
		p = p[2:]
	case strings.Contains(p, ":"):
		return "", false
	}
	p = strings.ReplaceAll(p, "\\", "/")
	clean := path.Clean("/" + p)[1:]
	if clean == "" || clean != strings.Trim(p, "/") || strings.HasPrefix(clean, "../") || clean == ".." {
		return "", false
	}
	return clean, true
}

// writeFileAtomic writes data to a temporary file beside dst and renames
// it into place, so an interrupted export never leaves a half file.
func writeFileAtomic(dst string, data []byte, mtimeMillis int64) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".livesync-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if mtimeMillis > 0 {
		t := time.UnixMilli(mtimeMillis)
		if err := os.Chtimes(tmp.Name(), t, t); err != nil {
			return err
		}
	}
	return os.Rename(tmp.Name(), dst)
}

func readDumpFile(name string) (docs, local []livesync.Doc, err error) {
	f := os.Stdin
	if name != "-" {
		f, err = os.Open(name)
		if err != nil {
			return nil, nil, err
		}
		defer f.Close()
	}
	docs, local, err = readDump(f)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	return docs, local, nil
}

// vault is what a dump says about its vault.
type vault struct {
	settings livesync.Settings
	salt     []byte
}

// vaultOf reads the vault's settings from the milestone's PREFERRED tweak
// values and the E2EE salt from the sync parameters. Without a milestone
// the new-vault defaults apply, with encryption turned on if any
// document carries ciphertext.
func vaultOf(docs, local []livesync.Doc, passphrase string) (vault, error) {
	v := vault{settings: livesync.Settings{Passphrase: passphrase}}
	haveMilestone := false
	for _, d := range local {
		switch d.ID() {
		case negotiate.SyncParametersDocID:
			p, err := negotiate.ParseSyncParameters(mustJSON(d))
			if err != nil {
				return v, fmt.Errorf("the sync parameters document: %w", err)
			}
			salt, err := p.Salt()
			if err != nil {
				return v, fmt.Errorf("the sync parameters document: %w", err)
			}
			v.salt = salt
		case negotiate.MilestoneDocID:
			m, err := negotiate.ParseMilestone(mustJSON(d))
			if err != nil {
				return v, fmt.Errorf("the milestone document: %w", err)
			}
			if pref, ok := m.TweakValues[negotiate.PreferredNode]; ok {
				s, err := livesync.FromTweakValues(v.settings, pref)
				if err != nil && !(errors.Is(err, engine.ErrUnsupported) && passphrase == "") {
					return v, err
				}
				v.settings = s
				haveMilestone = true
			}
		}
	}
	if !haveMilestone {
		for _, d := range docs {
			if _, ok := d["e_"]; ok {
				v.settings.Encrypt = true
				break
			}
		}
	}
	if (v.settings.Encrypt || v.settings.PathObfuscation) && passphrase == "" {
		return v, fmt.Errorf("the vault is end-to-end encrypted: set LIVESYNC_PASSPHRASE or use --passphrase-file")
	}
	if v.settings.Encrypt && v.salt == nil {
		return v, fmt.Errorf("the vault is encrypted but the dump has no %s document (its salt): add it under \"local_docs\"", negotiate.SyncParametersDocID)
	}
	return v, nil
}

func mustJSON(d livesync.Doc) []byte {
	b, _ := d.MarshalJSON()
	return b
}
