package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/livesync-go/livesync-go/adapters/folder"
	"github.com/livesync-go/livesync-go/engine/dump"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/replicate"
	"github.com/livesync-go/livesync-go/engine/vault"
)

func runImport(env *cliEnv, args []string) error {
	c := env.newCommand("import", "import DIR REMOTE [flags]  |  import --dir DIR --out FILE [flags]")
	dir := c.fs.String("dir", "", "vault folder to read")
	out := c.fs.String("out", "", "dump file to write (- for stdout) instead of importing into a remote")
	hidden := c.fs.Bool("hidden", false, "also import dot-files and dot-folders as Hidden File Sync documents")
	var vf vaultFlags
	addVaultFlags(c.fs, &vf)
	if err := c.parse(args); err != nil {
		return err
	}
	pos := c.pos
	if *dir == "" && len(pos) > 0 {
		*dir, pos = pos[0], pos[1:]
	}
	if *out == "" {
		if *dir == "" || len(pos) > 1 {
			return usageError{"import takes a folder and a remote (or --dir and --out to write a dump)"}
		}
		return importRemote(c, *dir, first(pos), *hidden, vf.config(c.fs))
	}
	if *dir == "" || len(pos) > 0 {
		return usageError{"both --dir and --out are required"}
	}
	pass, err := c.dumpPassphrase()
	if err != nil {
		return err
	}
	if (vf.encrypt || vf.obfuscate) && pass == "" {
		return usageError{"--encrypt and --obfuscate-paths need a passphrase: set LIVESYNC_PASSPHRASE or use --passphrase-file"}
	}
	s := livesync.Settings{CaseSensitive: vf.caseSensitive, Encrypt: vf.encrypt, PathObfuscation: vf.obfuscate, CustomChunkSize: vf.chunkSize}
	if vf.encrypt || vf.obfuscate {
		s.Passphrase = pass
	}
	return importDump(env, *dir, *out, *hidden, s)
}

// importDump writes the files of dir as the dump of a new vault with
// settings s into the file out ("-": stdout). An unreadable file is
// skipped with a warning; the others are imported and the exit is
// non-zero.
func importDump(env *cliEnv, dir, out string, hidden bool, s livesync.Settings) error {
	b, err := dump.NewBuilder(s)
	if err != nil {
		return err
	}
	paths, err := folder.List(dir, hidden)
	if err != nil {
		return err
	}
	failed := 0
	var total int64
	for _, rel := range paths {
		if err := env.ctx.Err(); err != nil {
			return err
		}
		full := filepath.Join(dir, filepath.FromSlash(rel))
		info, err := os.Stat(full)
		var data []byte
		if err == nil {
			data, err = os.ReadFile(full)
		}
		if err == nil {
			var fe *dump.FileError
			if err = b.Add(folder.VaultPath(rel), data, info.ModTime()); errors.As(err, &fe) {
				err = fe.Err // this file cannot be split: skipped
			} else if err != nil {
				return err
			}
		}
		if err != nil {
			fmt.Fprintf(env.stderr, "skip %s: %s\n", safe(rel), safeErr(err))
			failed++
			continue
		}
		total += int64(len(data))
	}
	if err := writeDumpFile(env, out, folderVaultName(dir), b); err != nil {
		return err
	}
	if out != "-" {
		fmt.Fprintf(env.stdout, "imported %d files (%d bytes) into %s: %d documents, %d chunks\n",
			b.Files(), total, out, b.Files(), b.Chunks())
	}
	if failed > 0 {
		return partialError{failed: failed, total: len(paths)}
	}
	return nil
}

// writeDumpFile writes the dump b into the file out (through a temporary
// file renamed into place), or on stdout for "-". This device is the
// dump's one node, serving the vault vaultName.
func writeDumpFile(env *cliEnv, out, vaultName string, b *dump.Builder) error {
	dev := deviceInfo
	dev.VaultName = vaultName
	if out == "-" {
		return b.Write(env.stdout, dev, env.now())
	}
	f, err := os.CreateTemp(filepath.Dir(out), ".livesync-dump-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := b.Write(f, dev, env.now()); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), out)
}

// importRemote writes the files of dir into a replica (a temporary one
// unless --store names one) and pushes them to the remote. It first pulls
// the remote's metadata, so a file the remote has gets a new revision of
// its document (not a conflicting first one), and an unchanged file none.
// In the replica every file's chunks are written before its metadata,
// and the push sends documents in that order: the remote never holds
// metadata whose chunks were not sent first. An unreadable file is
// skipped with a warning; the others are imported and the exit is
// non-zero.
func importRemote(c *command, dir, remoteArg string, hidden bool, newVault vaultConfig) error {
	env := c.cliEnv
	spec, err := c.remote(remoteArg)
	if err != nil {
		return err
	}
	paths, err := folder.List(dir, hidden)
	if err != nil {
		return err
	}
	rep, err := c.scratchReplica()
	if err != nil {
		return err
	}
	defer rep.Close()
	l, err := c.connect(spec, rep, connectOptions{create: true, newVault: newVault})
	if err != nil {
		return err
	}
	defer l.Close()
	// A journal bucket cannot leave chunks out: it receives whole packs.
	if _, err := c.replicate(rep, l, replicate.Pull, vault.SyncOptions{MetadataOnly: l.Journal() == nil}); err != nil {
		return err
	}
	imported, unchanged, failed, total, err := importFiles(c, rep, dir, paths)
	if err != nil {
		return err
	}
	res, err := c.replicate(rep, l, replicate.Push, vault.SyncOptions{})
	if err != nil {
		return err
	}
	if c.cf.json {
		writeJSON(env.stdout, map[string]any{"ok": failed == 0 && res.Push.WriteFailures == 0, "command": "import", "remote": l.ID(),
			"files": imported, "unchanged": unchanged, "failed": failed, "bytes": total, "pushed": progressJSON(res.Push)})
	} else {
		fmt.Fprintf(env.stdout, "imported %d files (%d bytes) into %s", imported, total, l.ID())
		if unchanged > 0 {
			fmt.Fprintf(env.stdout, "; %d unchanged", unchanged)
		}
		if res.Journal != nil {
			fmt.Fprintf(env.stdout, "; sent %d %s (%d records)\n", res.Journal.PacksSent, plural(res.Journal.PacksSent, "pack", "packs"), res.Journal.RecordsSent)
		} else {
			fmt.Fprintf(env.stdout, "; pushed %d docs\n", res.Push.DocsWritten)
		}
	}
	if failed > 0 {
		return partialError{failed: failed, total: len(paths), verb: "read"}
	}
	if res.Push.WriteFailures > 0 {
		return partialError{msg: fmt.Sprintf("the remote refused %d documents (forbidden or unauthorized)", res.Push.WriteFailures)}
	}
	return nil
}

// Import batches: files are written into the replica this many at a
// time (or fewer, past importBatchBytes of content), each batch in two
// store transactions.
const (
	importBatchFiles = 1000
	importBatchBytes = 32 << 20
)

// importFiles writes the files of dir at paths into the replica's vault
// in batches and counts them; an unreadable file is named on stderr and
// skipped, a failure of the local replica stops the import. A batch is
// in the replica once its progress is shown: an interrupted import,
// run again, finds those files unchanged.
func importFiles(c *command, rep *replica, dir string, paths []string) (imported, unchanged, failed int, total int64, err error) {
	pr := newImportProgress(c, len(paths))
	defer pr.finish()
	var batch []vault.FileWrite
	var rels []string
	var size int64
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		res, err := rep.v.PutFiles(c.ctx, batch)
		if err != nil {
			return err
		}
		for i, r := range res {
			switch {
			case r.Err != nil:
				fmt.Fprintf(c.stderr, "skip %s: %s\n", safe(rels[i]), safeErr(r.Err))
				failed++
				continue
			case r.Unchanged:
				unchanged++
			default:
				imported++
			}
			total += int64(len(batch[i].Data))
		}
		pr.add(len(batch))
		batch, rels, size = batch[:0], rels[:0], 0
		return nil
	}
	for _, rel := range paths {
		if err := c.ctx.Err(); err != nil {
			return 0, 0, 0, 0, err
		}
		data, mtime, err := readImportFile(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			fmt.Fprintf(c.stderr, "skip %s: %s\n", safe(rel), safeErr(err))
			failed++
			pr.add(1)
			continue
		}
		batch = append(batch, vault.FileWrite{Path: folder.VaultPath(rel), Data: data, WriteOptions: vault.WriteOptions{MTime: mtime}})
		rels = append(rels, rel)
		if size += int64(len(data)); len(batch) >= importBatchFiles || size >= importBatchBytes {
			if err := flush(); err != nil {
				return 0, 0, 0, 0, err
			}
		}
	}
	if err := flush(); err != nil {
		return 0, 0, 0, 0, err
	}
	return imported, unchanged, failed, total, nil
}

// readImportFile reads a regular file and its modification time.
func readImportFile(full string) ([]byte, time.Time, error) {
	info, err := os.Stat(full)
	if err != nil {
		return nil, time.Time{}, err
	}
	if !info.Mode().IsRegular() {
		return nil, time.Time{}, fmt.Errorf("not a regular file")
	}
	data, err := os.ReadFile(full)
	return data, info.ModTime(), err
}

// importProgress shows how many files of an import are in the local
// replica: a bar on a terminal, a line per batch otherwise, nothing
// when quiet.
type importProgress struct {
	c          *command
	done, all  int
	bar        *progressbar.ProgressBar
	quiet, tty bool
}

func newImportProgress(c *command, all int) *importProgress {
	pr := &importProgress{c: c, all: all, quiet: c.cf.quiet, tty: c.stderrTerminal}
	if !pr.quiet && pr.tty {
		pr.bar = progressbar.NewOptions(all, progressbar.OptionSetWriter(c.stderr), progressbar.OptionSetDescription("importing"),
			progressbar.OptionShowCount(), progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionFullWidth(),
			progressbar.OptionSetPredictTime(true), progressbar.OptionOnCompletion(func() { fmt.Fprintln(c.stderr) }))
	}
	return pr
}

// add counts n more files stored (or skipped).
func (pr *importProgress) add(n int) {
	pr.done += n
	switch {
	case pr.quiet:
	case pr.bar != nil:
		_ = pr.bar.Set(pr.done)
	case n > 1 || pr.done == pr.all:
		fmt.Fprintf(pr.c.stderr, "stored %d/%d files locally\n", pr.done, pr.all)
	}
}

func (pr *importProgress) finish() {
	if pr.bar != nil && !pr.bar.IsFinished() {
		_ = pr.bar.Finish()
	}
}
