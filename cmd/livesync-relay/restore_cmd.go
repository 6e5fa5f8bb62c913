package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/livesync-go/livesync-go/engine/store/boltstore"
)

func init() {
	register("restore", subcommand{summary: "restore a backup into a data folder (checked whole before anything is replaced)", run: runRestore})
}

const restoreUsage = `usage: livesync-relay restore --in FILE --data-dir DIR [--force]

Restores a backup made by "livesync-relay backup" into the data folder DIR
(stop the relay first). The archive is unpacked into a temporary folder
next to DIR and checked whole — every file against the manifest's SHA-256,
every database file opened — before it becomes DIR by a rename: a
damaged or truncated backup changes nothing.

flags:
  --in FILE        the backup ("-" reads stdin)
  --data-dir DIR   the data folder to restore into; it must be absent or
                   empty unless --force is given
  --force          replace a data folder that is not empty: it is kept,
                   renamed to DIR.before-restore-<time>, not deleted
`

type restoreFlags struct {
	in, dataDir string
	force       bool
}

func runRestore(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	fs := backupFlagSet("livesync-relay restore")
	var fl restoreFlags
	fs.StringVar(&fl.in, "in", "", "")
	fs.StringVar(&fl.dataDir, "data-dir", "", "")
	fs.BoolVar(&fl.force, "force", false, "")
	if code, done := parseBackupFlags(fs, args, restoreUsage, stderr); done {
		return code
	}
	if fl.in == "" || fl.dataDir == "" {
		fmt.Fprintf(stderr, "livesync-relay restore: --in FILE and --data-dir DIR are required\n\n%s", restoreUsage)
		return exitUsage
	}
	start := time.Now()
	res, err := restore(ctx, fl, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "livesync-relay restore: %v\n", err)
		if errors.As(err, new(usageError)) {
			return exitUsage
		}
		return exitFailure
	}
	fmt.Fprintf(stderr, "livesync-relay restore: %s restored into %s (%s, backup of %s) in %s\n",
		describeFiles(res.m), fl.dataDir, backupBytes(res.size), res.m.Created.Local().Format(time.RFC3339), time.Since(start).Round(time.Millisecond))
	if res.aside != "" {
		fmt.Fprintf(stderr, "livesync-relay restore: the data folder that was there is kept in %s (remove it once the restored relay works)\n", res.aside)
	}
	return exitOK
}

type restoreResult struct {
	m     *backupManifest
	size  int64
	aside string // where a replaced folder was moved
}

// restore unpacks the archive into a temporary folder next to the
// target, checks it whole, and renames it into place. The target, if it
// exists, is locked for the whole run (no relay may use it) and, when it
// is not empty (--force), moved aside rather than deleted.
func restore(ctx context.Context, fl restoreFlags, stderr io.Writer) (restoreResult, error) {
	target := filepath.Clean(fl.dataDir)
	exists, unlock, err := prepareTarget(target, fl.force)
	if err != nil {
		return restoreResult{}, err
	}
	defer unlock()
	in := os.Stdin
	var total int64
	if fl.in != "-" {
		if in, err = os.Open(fl.in); err != nil {
			return restoreResult{}, usageError{err.Error()}
		}
		defer in.Close()
		if fi, err := in.Stat(); err == nil {
			total = fi.Size()
		}
	}
	parent := filepath.Dir(target)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return restoreResult{}, err
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(target)+".restore-*")
	if err != nil {
		return restoreResult{}, err
	}
	defer os.RemoveAll(tmp) // after the rename: gone already
	p := newBackupProgress(stderr, "restore")
	p.total = total
	m, err := unpack(ctx, io.TeeReader(in, p), tmp)
	p.done()
	if err != nil {
		return restoreResult{}, err
	}
	if err := checkDatabases(tmp, m); err != nil {
		return restoreResult{}, err
	}
	res := restoreResult{m: m, size: p.n}
	res.aside, err = swapIn(tmp, target, exists)
	return res, err
}

// prepareTarget checks the target folder: absent, or a folder that is
// empty (but for a lock file) or may be replaced (force), and that no
// relay is using; it locks an existing one.
func prepareTarget(target string, force bool) (nonEmpty bool, unlock func(), err error) {
	entries, err := os.ReadDir(target)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return false, func() {}, nil
	case err != nil:
		return false, nil, usageError{fmt.Sprintf("--data-dir %s: %v", target, err)}
	}
	var names []string
	for _, e := range entries {
		if e.Name() != lockFile {
			names = append(names, e.Name())
		}
	}
	unlock, err = lockDataDir(target)
	if errors.Is(err, errFolderInUse) {
		return false, nil, fmt.Errorf("%w: a relay is running on %s; stop it before restoring into its folder", err, target)
	}
	if err != nil {
		return false, nil, err
	}
	if len(names) > 0 && !force {
		unlock()
		shown := names[:min(len(names), 5)]
		return false, nil, usageError{fmt.Sprintf("--data-dir %s is not empty (%s): restore into a new folder, or give --force to replace it (it is kept, renamed, not deleted)", target, strings.Join(shown, ", "))}
	}
	return len(names) > 0, unlock, nil
}

// unpack writes the archive's files into dir, each synced, and returns
// its manifest once the whole archive checked out.
func unpack(ctx context.Context, r io.Reader, dir string) (*backupManifest, error) {
	return readArchive(r, func(rel string, size int64, r io.Reader) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return err
		}
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, io.LimitReader(r, size))
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	})
}

// checkDatabases opens each database file of the unpacked backup
// read-only: a file that is not a bbolt database, or one in a store
// format newer than this build knows (it would refuse to open it), stops
// the restore.
func checkDatabases(dir string, m *backupManifest) error {
	for _, f := range m.Files {
		if f.Kind != fileBolt {
			continue
		}
		v, err := boltstore.ReadFormat(filepath.Join(dir, filepath.FromSlash(f.Path)), time.Second)
		if err != nil {
			return fmt.Errorf("%w: %s is not a readable database: %v", errBadBackup, f.Path, err)
		}
		if v > boltstore.FormatVersion() {
			return fmt.Errorf("%s is in store format %d, newer than this livesync-relay knows (%d): restore it with the newer livesync-relay that made the backup (downgrading is not supported)",
				f.Path, v, boltstore.FormatVersion())
		}
	}
	return nil
}

// swapIn makes the unpacked folder the target. A target that was not
// empty is renamed aside first (and back again if the last rename
// fails); an empty one is removed.
func swapIn(tmp, target string, nonEmpty bool) (aside string, err error) {
	syncBackupDir(tmp)
	if nonEmpty {
		aside = target + ".before-restore-" + time.Now().UTC().Format("20060102T150405Z")
		if err := os.Rename(target, aside); err != nil {
			return "", fmt.Errorf("moving the current data folder aside: %w", err)
		}
	} else if err := os.RemoveAll(target); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, target); err != nil {
		if aside != "" {
			if rerr := os.Rename(aside, target); rerr != nil {
				return "", fmt.Errorf("%w; and moving the old folder back failed (%v): it is in %s", err, rerr, aside)
			}
		}
		return "", err
	}
	syncBackupDir(filepath.Dir(target))
	return aside, nil
}
