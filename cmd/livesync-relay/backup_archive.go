package main

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi"
	"github.com/livesync-go/livesync-go/engine/store/boltstore"
)

// A backup is a tar stream: backupHeaderName first (what it is, which
// archive version), then each file of the data folder under
// backupDataPrefix, then backupManifestName, which lists every file with
// its size and SHA-256. The manifest comes last because the files are
// hashed as they are streamed; an archive cut short has none and is
// refused whole.
const (
	backupKind         = "livesync-relay-backup"
	backupVersion      = 1
	backupHeaderName   = "backup.json"
	backupManifestName = "manifest.json"
	backupDataPrefix   = "data/"
	// maxBackupMeta bounds what is read of the header and the manifest.
	maxBackupMeta = 16 << 20
)

// File kinds in a manifest.
const (
	fileBolt  = "bbolt" // a database file, copied by a bbolt read transaction
	filePlain = "file"  // any other file of the data folder, copied as is
)

// backupHeader is the first entry of an archive.
type backupHeader struct {
	Kind    string    `json:"kind"`
	Version int       `json:"version"`
	Created time.Time `json:"created"`
	// Source is "online" (streamed by a running relay) or "offline"
	// (read from a data folder no relay held).
	Source string `json:"source"`
}

// backupManifest is the last entry of an archive.
type backupManifest struct {
	backupHeader
	// StoreFormat is the newest store format of the build that wrote the
	// backup; each database file records its own in its entry.
	StoreFormat int            `json:"store_format"`
	Files       []manifestFile `json:"files"`
}

type manifestFile struct {
	Path   string `json:"path"` // relative to the data folder, slash-separated
	Kind   string `json:"kind"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// StoreFormat is a database file's store format (bbolt only).
	StoreFormat int `json:"store_format,omitempty"`
}

// archiveWriter writes a backup archive.
type archiveWriter struct {
	tw    *tar.Writer
	m     backupManifest
	added int64 // bytes of files added so far
}

func newArchiveWriter(w io.Writer, source string, now time.Time) (*archiveWriter, error) {
	a := &archiveWriter{tw: tar.NewWriter(w)}
	a.m.backupHeader = backupHeader{Kind: backupKind, Version: backupVersion, Created: now.UTC(), Source: source}
	a.m.StoreFormat = boltstore.FormatVersion()
	b, _ := json.MarshalIndent(a.m.backupHeader, "", "  ")
	return a, a.writeEntry(backupHeaderName, bytesReader(b), int64(len(b)), now)
}

func (a *archiveWriter) writeEntry(name string, r io.Reader, size int64, mod time.Time) error {
	err := a.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: size, Mode: 0o600, ModTime: mod.UTC(), Format: tar.FormatPAX})
	if err != nil {
		return err
	}
	n, err := io.Copy(a.tw, r)
	if err == nil && n != size {
		err = fmt.Errorf("%s: %d bytes copied, %d expected", name, n, size)
	}
	return err
}

// add streams one file of size bytes from r, hashing it.
func (a *archiveWriter) add(rel, kind string, storeFormat int, r io.Reader, size int64, mod time.Time) error {
	h := sha256.New()
	if err := a.writeEntry(backupDataPrefix+rel, io.TeeReader(r, h), size, mod); err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	a.added += size
	a.m.Files = append(a.m.Files, manifestFile{Path: rel, Kind: kind, Size: size, SHA256: hex.EncodeToString(h.Sum(nil)), StoreFormat: storeFormat})
	return nil
}

// close writes the manifest and ends the archive.
func (a *archiveWriter) close(now time.Time) error {
	b, _ := json.MarshalIndent(a.m, "", "  ")
	if err := a.writeEntry(backupManifestName, bytesReader(b), int64(len(b)), now); err != nil {
		return err
	}
	return a.tw.Close()
}

func bytesReader(b []byte) io.Reader { return strings.NewReader(string(b)) }

// folderEntry is a file of the data folder to back up.
type folderEntry struct {
	rel  string // slash-separated, relative to the folder
	db   string // the database's name for a database file, else ""
	size int64  // on disk when listed (a database's copy may differ)
	mod  time.Time
}

// listDataFolder lists what a backup of the data folder holds: every
// regular file except the locks (relay.lock, *.lock), temporary and
// hidden files (names starting with a dot, as the relay's atomic writes
// use) and the copies a store format upgrade keeps (*.bak-v*), which are
// old states of files the backup has. A database file is a <name>.db at
// the top whose name is a valid database name.
func listDataFolder(dir string) ([]folderEntry, error) {
	var out []folderEntry
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if p != dir && strings.HasPrefix(name, ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || !d.Type().IsRegular() || skipInBackup(name) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		e := folderEntry{rel: filepath.ToSlash(rel), size: info.Size(), mod: info.ModTime()}
		if n, ok := strings.CutSuffix(e.rel, ".db"); ok && !strings.Contains(e.rel, "/") && couchapi.ValidDatabaseName(n) {
			e.db = n
		}
		out = append(out, e)
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].rel < out[j].rel })
	return out, err
}

func skipInBackup(name string) bool {
	return name == lockFile || strings.HasSuffix(name, ".lock") || strings.Contains(name, ".bak-v")
}

// spoolFile is a temporary file for one database's copy: a bbolt read
// transaction lasts while it writes, and a write that must grow the
// database waits for it, so the copy goes to a local file at disk speed
// and is streamed to the client from there. It is made in dir (the data
// folder: the same disk, where the space is) and, on unix, unlinked at
// once, so nothing is left behind if the relay stops.
func spoolFile(dir string) (*os.File, func(), error) {
	f, err := os.CreateTemp(dir, ".backup-*.tmp")
	if err != nil {
		if f, err = os.CreateTemp("", "livesync-backup-*.tmp"); err != nil {
			return nil, nil, err
		}
	}
	unlinked := os.Remove(f.Name()) == nil
	return f, func() {
		f.Close()
		if !unlinked {
			os.Remove(f.Name())
		}
	}, nil
}

// addDatabase copies one database file through copyFn (a bbolt read
// transaction's WriteTo into the spool file) and adds the copy.
func (a *archiveWriter) addDatabase(spoolDir string, e folderEntry, copyFn func(w io.Writer) (boltstore.SnapshotInfo, error)) error {
	f, done, err := spoolFile(spoolDir)
	if err != nil {
		return fmt.Errorf("%s: a temporary file for its copy: %w", e.rel, err)
	}
	defer done()
	info, err := copyFn(f)
	if err != nil {
		return fmt.Errorf("%s: %w", e.rel, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	return a.add(e.rel, fileBolt, info.Format, f, info.Size, time.Now())
}

// maxWholeRead is the largest plain file read whole before it is added.
const maxWholeRead = 16 << 20

// addPlain adds a file that is not a database. A small one (the relay's
// own files: the admin, the uuid, peer books, the libp2p key) is read
// whole first: the relay replaces such files by a rename, so the read
// sees one version. A larger one (a stale database file of a database
// now kept on CouchDB) is streamed, and fails the backup if it changes
// size meanwhile.
func (a *archiveWriter) addPlain(dir string, e folderEntry) error {
	f, err := os.Open(filepath.Join(dir, filepath.FromSlash(e.rel)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil // removed since it was listed
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() > maxWholeRead {
		return a.add(e.rel, filePlain, 0, io.LimitReader(f, fi.Size()), fi.Size(), fi.ModTime())
	}
	b, err := io.ReadAll(io.LimitReader(f, maxWholeRead+1))
	if err != nil {
		return err
	}
	return a.add(e.rel, filePlain, 0, bytesReader(b), int64(len(b)), fi.ModTime())
}

// validArchivePath reports whether rel is a clean relative slash path
// inside the data folder.
func validArchivePath(rel string) bool {
	if rel == "" || strings.HasPrefix(rel, "/") || strings.Contains(rel, "\\") || strings.ContainsRune(rel, 0) || path.Clean(rel) != rel {
		return false
	}
	for _, part := range strings.Split(rel, "/") {
		if part == ".." || part == "." || part == "" {
			return false
		}
	}
	return true
}

// errBadBackup marks an archive restore refuses: not a backup, damaged,
// truncated, or not matching its manifest.
var errBadBackup = errors.New("not a complete, intact livesync-relay backup")

func badBackup(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errBadBackup, fmt.Sprintf(format, a...))
}

// readArchive reads a backup archive from r, checks it and passes each
// file to sink (which must read r to its end or fail). It fails unless
// the archive is whole: its header first, its manifest last, and every
// file present once with the size and SHA-256 the manifest gives. Files
// are passed to sink before the manifest vouches for them: whatever sink
// writes must stay unused until readArchive succeeds.
func readArchive(r io.Reader, sink func(rel string, size int64, r io.Reader) error) (*backupManifest, error) {
	tr := tar.NewReader(r)
	next := func() (*tar.Header, error) {
		h, err := tr.Next()
		switch {
		case errors.Is(err, io.EOF):
			return nil, badBackup("the archive ends before its manifest (truncated: an interrupted backup or copy?)")
		case errors.Is(err, io.ErrUnexpectedEOF):
			return nil, badBackup("the archive is truncated")
		case err != nil:
			return nil, badBackup("damaged archive: %v", err)
		}
		return h, nil
	}
	h, err := next()
	if err != nil {
		return nil, err
	}
	var head backupHeader
	if err := readMeta(tr, h, backupHeaderName, &head); err != nil {
		return nil, err
	}
	if head.Kind != backupKind {
		return nil, badBackup("its first entry does not describe a livesync-relay backup")
	}
	if head.Version > backupVersion {
		return nil, badBackup("the backup is in archive version %d, newer than this livesync-relay knows (%d): restore it with a newer livesync-relay", head.Version, backupVersion)
	}
	got := map[string]manifestFile{}
	for {
		if h, err = next(); err != nil {
			return nil, err
		}
		if h.Name == backupManifestName {
			break
		}
		rel, ok := strings.CutPrefix(h.Name, backupDataPrefix)
		if !ok || !validArchivePath(rel) || h.Typeflag != tar.TypeReg || h.Size < 0 {
			return nil, badBackup("unexpected entry %q", h.Name)
		}
		if _, dup := got[rel]; dup {
			return nil, badBackup("%s appears twice", rel)
		}
		hash := sha256.New()
		cr := &backupCountingReader{r: io.TeeReader(tr, hash)}
		if err := sink(rel, h.Size, cr); err != nil {
			return nil, archiveReadErr(rel, err)
		}
		if _, err := io.Copy(io.Discard, cr); err != nil {
			return nil, archiveReadErr(rel, err)
		}
		if cr.n != h.Size {
			return nil, badBackup("%s: %d bytes of %d", rel, cr.n, h.Size)
		}
		got[rel] = manifestFile{Path: rel, Size: h.Size, SHA256: hex.EncodeToString(hash.Sum(nil))}
	}
	var m backupManifest
	if err := readMeta(tr, h, backupManifestName, &m); err != nil {
		return nil, err
	}
	if _, err := tr.Next(); !errors.Is(err, io.EOF) {
		return nil, badBackup("entries or damage after the manifest")
	}
	return &m, checkManifest(&m, head, got)
}

// checkManifest compares the files read with the manifest.
func checkManifest(m *backupManifest, head backupHeader, got map[string]manifestFile) error {
	if m.Kind != head.Kind || m.Version != head.Version || !m.Created.Equal(head.Created) {
		return badBackup("the manifest does not belong to the archive's header")
	}
	if len(m.Files) != len(got) {
		return badBackup("the manifest lists %d files, the archive holds %d", len(m.Files), len(got))
	}
	for _, f := range m.Files {
		g, ok := got[f.Path]
		switch {
		case !ok:
			return badBackup("%s is in the manifest but not in the archive", f.Path)
		case g.Size != f.Size:
			return badBackup("%s: %d bytes, the manifest says %d", f.Path, g.Size, f.Size)
		case g.SHA256 != f.SHA256:
			return badBackup("%s: its SHA-256 does not match the manifest's (damaged)", f.Path)
		case f.Kind != fileBolt && f.Kind != filePlain:
			return badBackup("%s: unknown kind %q", f.Path, f.Kind)
		}
	}
	return nil
}

// archiveReadErr says a file's content could not be read whole.
func archiveReadErr(rel string, err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return badBackup("%s: the archive is truncated", rel)
	}
	if errors.Is(err, tar.ErrHeader) {
		return badBackup("%s: damaged archive: %v", rel, err)
	}
	return fmt.Errorf("%s: %w", rel, err)
}

// readMeta decodes the JSON entry h, which must be named want.
func readMeta(tr *tar.Reader, h *tar.Header, want string, v any) error {
	if h.Name != want || h.Typeflag != tar.TypeReg || h.Size > maxBackupMeta {
		return badBackup("expected %s, found %q", want, h.Name)
	}
	b, err := io.ReadAll(tr)
	if err != nil {
		return archiveReadErr(want, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return badBackup("%s is not valid JSON", want)
	}
	return nil
}

type backupCountingReader struct {
	r io.Reader
	n int64
}

func (c *backupCountingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
