// Package folder is a vault's files as a folder on disk: listing the
// files of a folder to import (List, VaultPath), and deciding where a
// document may be written when exporting (Path) and writing it there
// without leaving the folder (WriteFile, LinkOut). Every write goes
// through an os.Root of the folder, so no path, and no symbolic link
// already in the folder, leads a write outside it.
package folder

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/livesync-go/livesync-go/engine/docid"
)

// LinkOut returns, when a folder on the way to rel inside root is a
// symbolic link that leads out of root, which one and where it points (""
// otherwise): the reason os.Root refused the write, in the user's words.
func LinkOut(root *os.Root, rel string) string {
	parts := strings.Split(rel, "/")
	for i := 1; i < len(parts); i++ {
		dir := path.Join(parts[:i]...)
		fi, err := root.Lstat(filepath.FromSlash(dir))
		if err != nil {
			return ""
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			continue
		}
		if _, err := root.Stat(filepath.FromSlash(dir)); err != nil {
			target, _ := root.Readlink(filepath.FromSlash(dir))
			return fmt.Sprintf("%s is a symbolic link to %s", dir, target)
		}
	}
	return ""
}

// Verdict is what an export does with a document's path.
type Verdict int

const (
	Write  Verdict = iota // write the file
	Skip                  // not a file an export writes (ix:, ps:, i: without hidden)
	Refuse                // a path the plugin never writes there
)

// Path maps a document path to a relative file path (slashes) and
// says whether to write it. It follows what the plugin synchronises
// (commonlib isTargetFile, isValidPath): customisation-sync (ix:), obsolete plugin (ps:) and other
// ":" paths are skipped, and Hidden File Sync (i:) documents are written
// only with hidden. It refuses (why says why) paths that leave the
// output folder or are not clean, paths with control characters (commonlib
// isValidPath rejects them too), a dot-file or dot-folder anywhere in a
// normal document's path (the plugin takes a path starting with "." only
// through Hidden File Sync, docid.IsTargetPath; export is stricter and
// refuses a dot component at any depth, since a normal document naming
// .obsidian/plugins/x/main.js plants code), and any .git folder, even
// with hidden (hooks and config run outside Obsidian; the plugin's
// Hidden File Sync ignores /.git/ by default).
func Path(p string, hidden bool) (rel string, v Verdict, why string) {
	internal := false
	switch {
	case !docid.IsTargetPath(p, true):
		// The plugin never writes these (its flag files, its logs,
		// foreign namespaces): nor does export.
		return "", Skip, ""
	case strings.HasPrefix(p, "i:"):
		if !hidden {
			return "", Skip, ""
		}
		p, internal = p[2:], true
	case strings.Contains(p, ":"):
		return "", Skip, ""
	}
	if strings.ContainsFunc(p, unicode.IsControl) {
		return "", Refuse, "the path holds control characters"
	}
	p = strings.ReplaceAll(p, "\\", "/")
	clean := path.Clean("/" + p)[1:]
	if clean == "" || clean != p || strings.HasPrefix(clean, "../") || clean == ".." {
		return "", Refuse, "not a clean path inside the vault (\"..\", \".\", \"//\", a leading or trailing \"/\", or empty)"
	}
	for _, part := range strings.Split(clean, "/") {
		switch {
		case part == ".git":
			return "", Refuse, "a .git folder (git runs its hooks and config outside Obsidian)"
		case strings.HasPrefix(part, ".") && !internal:
			return "", Refuse, "a hidden path in a normal document (the plugin writes dot-files only through Hidden File Sync, i: documents, exported with --hidden)"
		}
	}
	return clean, Write, ""
}

// WriteFile writes data to a temporary file beside rel and renames
// it into place, so an interrupted export never leaves a half file. Every
// step goes through root: a path, or a symbolic link already in the
// folder, that leads outside it fails instead of writing there.
func WriteFile(root *os.Root, rel string, data []byte, mtimeMillis int64) error {
	dir := path.Dir(rel)
	if dir != "." {
		if err := root.MkdirAll(filepath.FromSlash(dir), 0o755); err != nil {
			return err
		}
	}
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return err
	}
	tmp := filepath.FromSlash(path.Join(dir, ".livesync-"+hex.EncodeToString(rnd[:])))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	defer root.Remove(tmp)
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if mtimeMillis > 0 {
		t := time.UnixMilli(mtimeMillis)
		if err := root.Chtimes(tmp, t, t); err != nil {
			return err
		}
	}
	return root.Rename(tmp, filepath.FromSlash(rel))
}

// WritePrivate writes data to path with mode 0600 through a synced
// temporary file in the same directory, renamed into place, so a crash
// leaves the old file or the new one, never half of one. It is for the
// secrets a program keeps beside its data: account files, keys.
func WritePrivate(path string, data []byte) error {
	return WriteAtomic(path, data, 0o600)
}

// WriteAtomic writes data to path with mode perm as WritePrivate does:
// through a synced temporary file renamed into place.
func WriteAtomic(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after a successful rename: nothing to remove
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// List lists the files below dir as slash-separated relative paths,
// sorted, leaving out what LiveSync never synchronises and, unless hidden
// is set, dot-files and dot-folders. Symbolic links to files count as
// files.
func List(dir string, hidden bool) ([]string, error) {
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
		if d.IsDir() {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			// A link to a file is imported as the file; a broken one is
			// listed so that reading it reports it; a link to anything
			// else is left out, as are devices, pipes and sockets.
			if st, err := os.Stat(p); err == nil && !st.Mode().IsRegular() {
				return nil
			}
		} else if !d.Type().IsRegular() {
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

// VaultPath is the vault path of a file found at rel in a folder: the
// path itself, with Hidden File Sync's "i:" prefix for dot-files and
// files in dot-folders.
func VaultPath(rel string) string {
	if strings.HasPrefix(rel, ".") || strings.Contains(rel, "/.") {
		return "i:" + rel
	}
	return rel
}
