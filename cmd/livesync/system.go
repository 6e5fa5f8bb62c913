package main

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
)

// deviceInfo is how this CLI names itself in a milestone's node_info when
// it writes a dump (import --dump); VaultName is the imported folder's.
var deviceInfo = negotiate.DeviceInfo{
	DeviceName:    "livesync-cli",
	AppVersion:    "livesync-go",
	PluginVersion: "livesync-go",
}

// fallbackVaultName is vault_name when nothing better names the vault.
const fallbackVaultName = "livesync"

// vaultNameFor returns the vault_name this device writes into a remote's
// milestone (node_info). The plugin writes the Obsidian vault's name
// there, which is its folder's name; this CLI writes the name of the
// folder the local replica serves: the folder holding .livesync/ for a
// store inside one (the default store is ./.livesync/store.db, so
// ~/notes/.livesync/store.db gives "notes"), else the folder holding the
// store file. A temporary replica (ls, cat, export or import against a
// remote without --store) serves no folder: then it is the remote's
// database name, or a bucket's prefix without its slashes (else the
// bucket's name). It is never empty.
func vaultNameFor(r *replica, spec remoteSpec) string {
	if r != nil && r.temp == "" && r.path != "" {
		if name := replicaFolderName(r.path); name != "" {
			return name
		}
	}
	var name string
	switch spec.kind {
	case "s3":
		name = strings.Trim(spec.s3.prefix, "/")
		if name == "" {
			name = spec.s3.bucket
		}
	default:
		if spec.url != nil {
			path := strings.Trim(spec.url.Path, "/")
			name = path[strings.LastIndexByte(path, '/')+1:]
		}
	}
	if name == "" {
		return fallbackVaultName
	}
	return name
}

// replicaFolderName is the name of the folder a store file at path
// serves: the parent of .livesync/ if the file is in one, else the
// file's own folder. It is "" for the root or an unusable path.
func replicaFolderName(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return ""
	}
	dir := filepath.Dir(abs)
	if filepath.Base(dir) == ".livesync" {
		dir = filepath.Dir(dir)
	}
	name := filepath.Base(dir)
	if name == string(filepath.Separator) || name == "." || name == "" {
		return ""
	}
	return name
}

// folderVaultName is the vault_name of a vault imported from the folder
// dir: the folder's name.
func folderVaultName(dir string) string {
	abs, err := filepath.Abs(dir)
	if err == nil {
		if name := filepath.Base(abs); name != string(filepath.Separator) && name != "." {
			return name
		}
	}
	return fallbackVaultName
}

// vaultSystemDocs returns the documents a new vault's database holds
// besides files: the versioning document, and as _local documents the sync
// parameters (with the E2EE salt, when encrypting) and a milestone in which
// this CLI is the only accepted node and its settings are PREFERRED.
// vaultName is the vault_name of its node_info.
func vaultSystemDocs(s livesync.Settings, salt []byte, vaultName string) (livesync.Doc, []livesync.Doc, error) {
	toDoc := func(v any) (livesync.Doc, error) {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		return livesync.ParseDoc(b)
	}
	version, err := toDoc(negotiate.NewVersionDoc())
	if err != nil {
		return nil, nil, err
	}
	var local []livesync.Doc
	if salt != nil {
		p, err := toDoc(negotiate.NewSyncParameters(salt))
		if err != nil {
			return nil, nil, err
		}
		local = append(local, p)
	}
	node, err := newNodeID()
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	ms := negotiate.NewMilestone(node, now)
	info := deviceInfo
	info.VaultName = vaultName
	ms.Register(node, negotiate.CouchDBChunkRange, info, s.TweakValues(), now)
	m, err := toDoc(ms)
	if err != nil {
		return nil, nil, err
	}
	return version, append(local, m), nil
}

// newNodeID returns a random 10-character base-36 node id, the shape of
// upstream's Math.random().toString(36).slice(-10).
func newNodeID() (string, error) {
	const digits = "0123456789abcdefghijklmnopqrstuvwxyz"
	b := make([]byte, 10)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random node id: %w", err)
	}
	for i := range b {
		b[i] = digits[int(b[i])%36]
	}
	return string(b), nil
}
