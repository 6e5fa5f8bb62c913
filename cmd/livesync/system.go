package main

import (
	"path/filepath"
	"strings"

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
		name = strings.Trim(spec.s3.Prefix, "/")
		if name == "" {
			name = spec.s3.Bucket
		}
	case "p2p":
		name = spec.group
	default:
		name = spec.couch.Database
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
