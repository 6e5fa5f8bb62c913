package main

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"time"

	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
)

// deviceInfo is how this CLI names itself in a milestone's node_info.
var deviceInfo = negotiate.DeviceInfo{
	DeviceName:    "livesync-cli",
	VaultName:     "",
	AppVersion:    "livesync-go",
	PluginVersion: "livesync-go",
}

// vaultSystemDocs returns the documents a new vault's database holds
// besides files: the versioning document, and as _local documents the sync
// parameters (with the E2EE salt, when encrypting) and a milestone in which
// this CLI is the only accepted node and its settings are PREFERRED.
func vaultSystemDocs(s livesync.Settings, salt []byte) (livesync.Doc, []livesync.Doc, error) {
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
	ms.Register(node, negotiate.CouchDBChunkRange, deviceInfo, s.TweakValues(), now)
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
