package main

import (
	"crypto/rand"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/livesync-go/livesync-go/engine/docid"
	"github.com/livesync-go/livesync-go/engine/livesync"
)

func runImport(env *cliEnv, args []string) error {
	fset := flag.NewFlagSet("import", flag.ContinueOnError)
	fset.SetOutput(env.stderr)
	dir := fset.String("dir", "", "vault folder to read")
	out := fset.String("out", "", "dump file to write (- for stdout)")
	passFile := fset.String("passphrase-file", "", "file holding the E2EE passphrase (default: $LIVESYNC_PASSPHRASE)")
	encrypt := fset.Bool("encrypt", false, "end-to-end encrypt the vault (needs a passphrase)")
	obfuscate := fset.Bool("obfuscate-paths", false, "obfuscate paths (needs a passphrase)")
	chunkSize := fset.Int("custom-chunk-size", 60, "customChunkSize of the vault (60: self-hosted CouchDB preset, 0: plugin default)")
	caseSensitive := fset.Bool("case-sensitive", false, "keep the case of paths in document ids")
	hidden := fset.Bool("hidden", false, "also import dot-files and dot-folders as Hidden File Sync documents")
	if err := fset.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	if *dir == "" || *out == "" {
		return usageError{"both --dir and --out are required"}
	}
	pass, err := env.passphrase(*passFile)
	if err != nil {
		return err
	}
	if (*encrypt || *obfuscate) && pass == "" {
		return usageError{"--encrypt and --obfuscate-paths need a passphrase: set LIVESYNC_PASSPHRASE or use --passphrase-file"}
	}
	s := livesync.Settings{
		CaseSensitive:   *caseSensitive,
		Encrypt:         *encrypt,
		PathObfuscation: *obfuscate,
		CustomChunkSize: *chunkSize,
	}
	if *encrypt || *obfuscate {
		s.Passphrase = pass
	}
	var salt []byte
	if s.Encrypt {
		salt = make([]byte, 32)
		if _, err := rand.Read(salt); err != nil {
			return err
		}
	}
	codec, err := livesync.New(livesync.Config{Settings: s, Salt: salt})
	if err != nil {
		return err
	}

	paths, err := vaultFiles(*dir, *hidden)
	if err != nil {
		return err
	}
	var chunkDocs, metaDocs []livesync.Doc
	seen := map[string]bool{}
	failed := 0
	var total int64
	for _, rel := range paths {
		if err := env.ctx.Err(); err != nil {
			return err
		}
		full := filepath.Join(*dir, filepath.FromSlash(rel))
		info, err := os.Stat(full)
		if err != nil {
			fmt.Fprintf(env.stderr, "skip %s: %v\n", rel, err)
			failed++
			continue
		}
		data, err := os.ReadFile(full)
		if err != nil {
			fmt.Fprintf(env.stderr, "skip %s: %v\n", rel, err)
			failed++
			continue
		}
		vaultPath := rel
		if strings.HasPrefix(rel, ".") || strings.Contains(rel, "/.") {
			vaultPath = "i:" + rel
		}
		mtime := info.ModTime().UnixMilli()
		meta, chunks, err := codec.FileDocs(vaultPath, data, mtime, mtime)
		if err != nil {
			fmt.Fprintf(env.stderr, "skip %s: %v\n", rel, err)
			failed++
			continue
		}
		// Chunks are written before the metadata that references them
		// (FORMAT.md §3.1); in a dump, order them first too.
		for _, c := range chunks {
			if seen[c.ID] {
				continue
			}
			seen[c.ID] = true
			rd, err := codec.EncodeRemote(livesync.ChunkDoc(c))
			if err != nil {
				return err
			}
			chunkDocs = append(chunkDocs, rd)
		}
		rd, err := codec.EncodeRemote(meta.Doc())
		if err != nil {
			return err
		}
		metaDocs = append(metaDocs, rd)
		total += int64(len(data))
	}
	docs := append(chunkDocs, metaDocs...)
	version, local, err := vaultSystemDocs(s, salt)
	if err != nil {
		return err
	}
	docs = append(docs, version)

	w := env.stdout
	if *out != "-" {
		f, err := os.CreateTemp(filepath.Dir(*out), ".livesync-dump-*")
		if err != nil {
			return err
		}
		defer os.Remove(f.Name())
		if err := writeDump(f, docs, local); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		if err := os.Rename(f.Name(), *out); err != nil {
			return err
		}
		fmt.Fprintf(env.stdout, "imported %d files (%d bytes) into %s: %d documents, %d chunks\n",
			len(metaDocs), total, *out, len(metaDocs), len(chunkDocs))
	} else if err := writeDump(w, docs, local); err != nil {
		return err
	}
	if failed > 0 {
		return partialError{failed: failed, total: len(paths)}
	}
	return nil
}

// vaultFiles lists the files below dir as slash-separated relative paths,
// sorted, leaving out what LiveSync never synchronises and, unless hidden
// is set, dot-files and dot-folders.
func vaultFiles(dir string, hidden bool) ([]string, error) {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if strings.HasPrefix(d.Name(), ".") && !hidden {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		if !docid.IsTargetPath(rel, hidden) {
			return nil
		}
		paths = append(paths, rel)
		return nil
	})
	sort.Strings(paths)
	return paths, err
}
