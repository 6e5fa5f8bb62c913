//go:build !js

package p2p

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/decorate"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// ErrNotJoined is the error of a served vault asked for documents before
// any peer's handshake gave it the group's sync parameters (the salt that
// encrypts what it serves).
var ErrNotJoined = errors.New("p2p: this device has not joined the group's vault yet: it holds no sync parameters for the group (a peer's first sync with it creates them)")

// ServedRecordsPrefix is where a replica that serves group keeps the
// group's handshake records, as _local documents under this prefix.
func ServedRecordsPrefix(group string) string { return "livesync-go/p2p/" + group + "/" }

// ServedVault is what a replica serves: its plaintext replica encoded to
// the remote form with the group's salt (read from its records, which the
// first peer's handshake writes) and settings, and its records under a
// per-group prefix.
//
// settings are the vault's settings with its passphrase (they encrypt
// what is served). Documents that peers push are decoded and written to
// the replica's store directly: they arrive without vault events (no
// FileCreated or FileChanged for them) until this device syncs on its
// own.
func ServedVault(v *vault.Vault, group string, settings livesync.Settings) *Served {
	st := v.Store()
	records := StoreRecords(st, ServedRecordsPrefix(group))
	c := &servedCodec{records: records, settings: settings}
	enc := decorate.Encoded(st, c.get)
	return &Served{Endpoint: enc, Chunks: enc, Records: records}
}

// servedCodec builds the codec of a served vault from the salt in its
// records, once per salt.
type servedCodec struct {
	records  negotiate.Port
	settings livesync.Settings

	mu    sync.Mutex
	salt  []byte
	codec *livesync.Codec
}

func (c *servedCodec) get(ctx context.Context) (*livesync.Codec, error) {
	raw, _, err := c.records.Read(ctx, negotiate.RecordSyncParameters)
	var salt []byte
	switch {
	case errors.Is(err, engine.ErrNotFound):
	case err != nil:
		return nil, fmt.Errorf("p2p: read the group's sync parameters: %w", err)
	default:
		if salt, err = negotiate.SaltOf(raw); err != nil {
			return nil, fmt.Errorf("p2p: the group's sync parameters: %w", err)
		}
	}
	if salt == nil && c.settings.Encrypt {
		return nil, ErrNotJoined
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.codec != nil && bytes.Equal(c.salt, salt) {
		return c.codec, nil
	}
	codec, err := livesync.New(livesync.Config{Settings: c.settings, Salt: salt})
	if err != nil {
		return nil, err
	}
	c.salt, c.codec = salt, codec
	return codec, nil
}

// RegisterServed runs v's own handshake on the records s serves, as a
// device of the group's vault: the first time it creates the salt, the
// version document and a milestone whose preferred settings are v's, and
// registers this device (dev); later it only refreshes this device's
// entry. A peer's first sync then adopts this vault's settings and salt
// instead of starting a vault of its own with the defaults. now is the
// clock (nil: time.Now).
func RegisterServed(ctx context.Context, v *vault.Vault, s *Served, dev negotiate.DeviceInfo, now func() time.Time) error {
	tv, err := v.TweakValues()
	if err != nil {
		return err
	}
	node, err := v.NodeID(ctx)
	if err != nil {
		return err
	}
	_, err = negotiate.Handshake(ctx, s.Records, negotiate.HandshakeOptions{NodeID: node, Range: negotiate.CouchDBChunkRange,
		Device: dev, Settings: tv, CreateIfMissing: true, Now: now})
	return err
}
