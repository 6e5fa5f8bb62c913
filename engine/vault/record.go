package vault

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/store"
)

// RecordID is the _local document (not replicated) in which the replica
// keeps the vault's settings and what it knows of each remote. The name
// is the one the command-line client has always used, so replicas it
// wrote open unchanged.
const RecordID = "livesync-go-cli"

// record is what the replica knows of its vault (the JSON of RecordID).
type record struct {
	// Tweaks are the vault's must-match settings (the remote's PREFERRED
	// tweak values, or those of a new vault). The passphrase is never
	// part of them.
	Tweaks  negotiate.TweakValues   `json:"tweak_values"`
	Remotes map[string]*RemoteState `json:"remotes,omitempty"`
}

// RemoteState is what the replica remembers of one remote, by remote ID.
type RemoteState struct {
	LastPull    time.Time `json:"last_pull,omitzero"`
	LastPullSeq string    `json:"last_pull_seq,omitempty"`
	LastPush    time.Time `json:"last_push,omitzero"`
	LastPushSeq string    `json:"last_push_seq,omitempty"`
	// JournalID and JournalPrefix identify a journal bucket's checkpoint
	// in the replica (journalsync.CheckpointID), so its quarantine can be
	// read without contacting the bucket.
	JournalID     string `json:"journal_id,omitempty"`
	JournalPrefix string `json:"journal_prefix,omitempty"`
}

// loadRecord reads the vault record, nil when the replica holds none.
func loadRecord(ctx context.Context, st store.Store) (*record, error) {
	raw, err := st.GetLocal(ctx, RecordID)
	if errors.Is(err, engine.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r record
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, &engine.Error{Op: "vault: read the vault record", DocID: "_local/" + RecordID, Stage: engine.StageStorage,
			Err: fmt.Errorf("the vault record is damaged: %v: %w", err, engine.ErrMalformed)}
	}
	return &r, nil
}

// saveRecord writes the vault record.
func saveRecord(ctx context.Context, st store.Store, r *record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return st.PutLocal(ctx, RecordID, b)
}

// NodeID returns this device's node id kept in st, creating it on first
// use (a new random id, as the plugin makes one).
func NodeID(ctx context.Context, st store.Store) (string, error) {
	if id, err := NodeIDIfAny(ctx, st); err != nil || id != "" {
		return id, err
	}
	node, err := negotiate.NewNodeID()
	if err != nil {
		return "", err
	}
	if err := PutNodeID(ctx, st, node); err != nil {
		return "", err
	}
	return node, nil
}

// NodeIDIfAny returns this device's node id kept in st, "" if there is
// none yet (it creates nothing).
func NodeIDIfAny(ctx context.Context, st store.Store) (string, error) {
	raw, err := st.GetLocal(ctx, negotiate.NodeInfoLocalID)
	if errors.Is(err, engine.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var d negotiate.NodeInfoDoc
	if json.Unmarshal(raw, &d) != nil {
		return "", nil
	}
	return d.NodeID, nil
}

// PutNodeID records node as this device's node id in st (a replica
// emptied for a fresh fetch keeps the device's id this way).
func PutNodeID(ctx context.Context, st store.Store, node string) error {
	b, _ := json.Marshal(negotiate.NodeInfoDoc{ID: negotiate.NodeInfoDocID, Type: negotiate.TypeNodeInfo, NodeID: node, V20220607: true})
	return st.PutLocal(ctx, negotiate.NodeInfoLocalID, b)
}

// SettingsOf returns the format settings of tweak values, without a
// passphrase.
func SettingsOf(tv negotiate.TweakValues) (livesync.Settings, error) {
	// FromTweakValues validates the result, and an encrypted vault needs a
	// passphrase to be valid: give a placeholder, then take it away.
	s, err := livesync.FromTweakValues(livesync.Settings{Passphrase: "-"}, tv)
	if err != nil {
		return s, fmt.Errorf("the vault's settings: %w", err)
	}
	s.Passphrase = ""
	return s, nil
}

// NeedsPassphrase reports whether a vault with s needs the passphrase to
// make ids or to talk to a remote.
func NeedsPassphrase(s livesync.Settings) bool { return s.Encrypt || s.PathObfuscation }
