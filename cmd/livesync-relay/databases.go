package main

import (
	"log/slog"
	"os"

	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi"
	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi/boltdir"
	ebridge "github.com/livesync-go/livesync-go/engine/bridge"
	"github.com/livesync-go/livesync-go/engine/holdback"
	"github.com/livesync-go/livesync-go/engine/hunt"
)

// heldDatabases are the relay's databases: the data directory's bbolt
// files (boltdir), each served through a hold-back and bridged to its
// upstreams, if it has some (couchapi.HeldDatabases). The relay's own
// paths (reservedNames) are no database.
type heldDatabases struct {
	*couchapi.HeldDatabases
	dir *boltdir.Databases
}

// newHeldDatabases serves the databases of dir: passphrases are those the
// configuration gives (secret: never logged), ups the upstreams of each
// database, uuid the relay's server uuid (replication ids) and hc the
// hunt's configuration.
func newHeldDatabases(dir *boltdir.Databases, cfg holdback.Config, passphrases map[string]string, log *slog.Logger,
	uuid string, ups map[string][]upstreamSpec, hc hunt.Config) *heldDatabases {
	bridgeOf := func(name string, local ebridge.Local, log *slog.Logger) (*ebridge.Bridge, error) {
		specs, ok := ups[name]
		if !ok {
			return nil, nil
		}
		return newBridge(name, local, bridgeSetup{uuid: uuid, specs: specs, hunt: hc}, log)
	}
	held := couchapi.NewHeld(dir, couchapi.HeldConfig{Holdback: cfg, Passphrases: passphrases, Reserved: reservedNames,
		Bridge: bridgeOf, Log: log})
	return &heldDatabases{HeldDatabases: held, dir: dir}
}

// fileSize is the size of a database's bbolt file.
func (h *heldDatabases) fileSize(name string) (int64, bool) {
	p := h.dir.Path(name)
	if p == "" {
		return 0, false
	}
	fi, err := os.Stat(p)
	if err != nil {
		return 0, false
	}
	return fi.Size(), true
}
