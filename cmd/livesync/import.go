package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

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

// importFiles writes the files of dir at paths into the replica's vault
// and counts them; an unreadable file is named on stderr and skipped, a
// failure of the local replica stops the import.
func importFiles(c *command, rep *replica, dir string, paths []string) (imported, unchanged, failed int, total int64, err error) {
	for _, rel := range paths {
		if err := c.ctx.Err(); err != nil {
			return 0, 0, 0, 0, err
		}
		full := filepath.Join(dir, filepath.FromSlash(rel))
		info, err := os.Stat(full)
		if err == nil && !info.Mode().IsRegular() {
			err = fmt.Errorf("not a regular file")
		}
		var data []byte
		if err == nil {
			data, err = os.ReadFile(full)
		}
		var res vault.WriteResult
		if err == nil {
			res, err = rep.v.Write(c.ctx, folder.VaultPath(rel), data, vault.WriteOptions{MTime: info.ModTime()})
			var le *localError
			if errors.As(err, &le) {
				return 0, 0, 0, 0, err
			}
		}
		if err != nil {
			fmt.Fprintf(c.stderr, "skip %s: %s\n", safe(rel), safeErr(err))
			failed++
			continue
		}
		if res.Unchanged {
			unchanged++
		} else {
			imported++
		}
		total += int64(len(data))
	}
	return imported, unchanged, failed, total, nil
}
