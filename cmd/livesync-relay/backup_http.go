package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store/boltstore"
)

// backupRoute is the admin endpoint that streams a backup of the data
// folder; backupEstimateHeader gives the files' size on disk when the
// stream starts (the copies may differ a little), for progress.
const (
	backupRoute          = "/_relay/backup"
	backupEstimateHeader = "X-Relay-Backup-Estimate"
)

// backup answers GET /_relay/backup for admins only (metrics_public does
// not open it): a tar archive of the data folder (backup_archive.go),
// each database file a consistent copy made by a bbolt read transaction
// while writes go on, each other file as the relay last wrote it whole.
// A failure once the stream has begun cuts the connection, so the
// client never takes a partial archive for a complete one.
func (r *relay) backup(w http.ResponseWriter, req *http.Request) {
	switch r.isAdmin(req) {
	case http.StatusOK:
	case http.StatusForbidden:
		writeJSONStatus(w, http.StatusForbidden, map[string]string{"error": "forbidden", "reason": "You are not a server admin."})
		return
	default:
		w.Header().Set("WWW-Authenticate", `Basic realm="livesync-relay"`)
		writeJSONStatus(w, http.StatusUnauthorized, map[string]string{"error": "unauthorized", "reason": "Admin credentials are required."})
		return
	}
	if r.s.noDataDir() || r.dbs.dir.bolt == nil {
		writeJSONStatus(w, http.StatusConflict, map[string]string{"error": "no_data_folder",
			"reason": "every database is kept on CouchDB: the relay has no data folder to back up; back up the CouchDB server"})
		return
	}
	entries, err := listDataFolder(r.s.dataDir)
	if err != nil {
		r.log.Error("backup: listing the data folder", "err", err)
		writeJSONStatus(w, http.StatusInternalServerError, map[string]string{"error": "backup_failed", "reason": "the data folder could not be listed"})
		return
	}
	var estimate int64
	for _, e := range entries {
		estimate += e.size
	}
	now := time.Now()
	h := w.Header()
	h.Set("Content-Type", "application/x-tar")
	h.Set("Content-Disposition", `attachment; filename="livesync-relay-backup-`+now.UTC().Format("20060102T150405Z")+`.tar"`)
	h.Set("Cache-Control", "no-store")
	h.Set(backupEstimateHeader, strconv.FormatInt(estimate, 10))
	w.WriteHeader(http.StatusOK)
	if req.Method == http.MethodHead {
		return
	}
	files, size, err := r.writeBackup(req.Context(), w, entries, now)
	if err != nil {
		r.log.Error("backup: the stream was cut", "err", err)
		panic(http.ErrAbortHandler)
	}
	r.log.Info("backup streamed", "files", files, "bytes", size, "duration", time.Since(now).Round(time.Millisecond).String())
}

// writeBackup writes the archive of entries to w: databases kept on
// CouchDB are not in the data folder; a database deleted meanwhile is
// left out.
func (r *relay) writeBackup(ctx context.Context, w io.Writer, entries []folderEntry, now time.Time) (files int, size int64, err error) {
	aw, err := newArchiveWriter(w, "online", now)
	if err != nil {
		return 0, 0, err
	}
	dir := r.s.dataDir
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return 0, 0, err
		}
		if e.db == "" || r.dbs.dir.onCouch(e.db) {
			err = aw.addPlain(dir, e)
		} else {
			err = r.addOpenDatabase(ctx, aw, e)
		}
		if err != nil {
			return 0, 0, err
		}
	}
	if err := aw.close(time.Now()); err != nil {
		return 0, 0, err
	}
	return len(aw.m.Files), aw.added, nil
}

// addOpenDatabase adds a consistent copy of a database the relay has
// open (or opens now, as the API would).
func (r *relay) addOpenDatabase(ctx context.Context, aw *archiveWriter, e folderEntry) error {
	st, err := r.dbs.dir.bolt.Open(ctx, e.db)
	if errors.Is(err, engine.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", e.rel, err)
	}
	return aw.addDatabase(r.s.dataDir, e, func(w io.Writer) (boltstore.SnapshotInfo, error) {
		return boltstore.Snapshot(st, w)
	})
}

// backupOffline writes the archive of a data folder no relay holds: it
// takes the folder's lock (so no relay starts meanwhile) and copies each
// database file read-only, as it is, without migrating it.
func backupOffline(dir string, w io.Writer, now time.Time) (*backupManifest, error) {
	unlock, err := lockDataDir(dir)
	if errors.Is(err, errFolderInUse) {
		return nil, fmt.Errorf("%w: a running relay holds it; back it up through the relay instead: livesync-relay backup --url URL --out FILE", err)
	}
	if err != nil {
		return nil, err
	}
	defer unlock()
	entries, err := listDataFolder(dir)
	if err != nil {
		return nil, err
	}
	aw, err := newArchiveWriter(w, "offline", now)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.db == "" {
			err = aw.addPlain(dir, e)
		} else {
			p := filepath.Join(dir, e.rel)
			err = aw.addDatabase(dir, e, func(w io.Writer) (boltstore.SnapshotInfo, error) {
				return boltstore.SnapshotFile(p, w, dbLockTimeout)
			})
		}
		if err != nil {
			return nil, err
		}
	}
	return &aw.m, aw.close(time.Now())
}
