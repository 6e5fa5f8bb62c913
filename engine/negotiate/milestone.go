package negotiate

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"time"

	"github.com/livesync-go/livesync-go/engine"
)

// DeviceInfo describes this device in its node_info entry (upstream's
// DeviceInfo, commonlib src/common/models/db.definition.ts). Progress is
// the remote's update sequence (CouchDB) or newest received journal file
// (object storage) at connection time, as a string.
type DeviceInfo struct {
	DeviceName    string
	VaultName     string
	AppVersion    string
	PluginVersion string
	Progress      string
}

// NodeInfo is one node's entry in a milestone's node_info (upstream's
// NodeData): its DeviceInfo plus LastConnected in Unix milliseconds.
// Members this type does not model are kept and written back unchanged.
type NodeInfo struct {
	DeviceInfo
	LastConnected int64

	extra map[string]json.RawMessage
}

// MarshalJSON encodes the entry in the member order upstream writes.
func (n NodeInfo) MarshalJSON() ([]byte, error) {
	var w objWriter
	w.field("app_version", n.AppVersion)
	w.field("plugin_version", n.PluginVersion)
	w.field("vault_name", n.VaultName)
	w.field("device_name", n.DeviceName)
	w.field("progress", n.Progress)
	w.field("last_connected", n.LastConnected)
	w.extras(n.extra)
	return w.bytes("node info")
}

// UnmarshalJSON decodes an entry; null gives the zero entry. Wrong member
// types fail with engine.ErrMalformed.
func (n *NodeInfo) UnmarshalJSON(data []byte) error {
	*n = NodeInfo{}
	if isNull(data) {
		return nil
	}
	const what = "node info"
	m, err := decodeObject(what, data)
	if err != nil {
		return err
	}
	for _, f := range []struct {
		key string
		dst *string
	}{
		{"app_version", &n.AppVersion}, {"plugin_version", &n.PluginVersion}, {"vault_name", &n.VaultName},
		{"device_name", &n.DeviceName}, {"progress", &n.Progress},
	} {
		if *f.dst, err = decodeString(what, f.key, m[f.key]); err != nil {
			*n = NodeInfo{}
			return err
		}
		delete(m, f.key)
	}
	if n.LastConnected, err = decodeInt(what, "last_connected", m["last_connected"]); err != nil {
		return err
	}
	delete(m, "last_connected")
	if len(m) > 0 {
		n.extra = m
	}
	return nil
}

// UnmarshalJSON decodes {min, max, current}, accepting any integral JSON
// number; null gives the zero range. Other members are dropped (upstream
// writes none).
func (r *ChunkRange) UnmarshalJSON(data []byte) error {
	*r = ChunkRange{}
	if isNull(data) {
		return nil
	}
	const what = "node chunk info"
	m, err := decodeObject(what, data)
	if err != nil {
		return err
	}
	if r.Min, err = decodeInt(what, "min", m["min"]); err != nil {
		return err
	}
	if r.Max, err = decodeInt(what, "max", m["max"]); err != nil {
		return err
	}
	r.Current, err = decodeInt(what, "current", m["current"])
	return err
}

// Milestone is the remote registry document (upstream's
// EntryMilestoneInfo): the CouchDB _local document MilestoneDocID or the
// object JournalMilestoneKey. Created and NodeInfo[].LastConnected are
// Unix milliseconds. TweakValues maps node ids, and PreferredNode, to tweak
// sets. Members this type does not model (top level and inside node_info
// entries and tweak sets) are kept, so re-encoding a milestone written by
// the plugin loses nothing; "cleaned" is written when it is true or was
// present. Nil maps and slices are valid and encode as empty.
type Milestone struct {
	ID            string
	Rev           string
	Type          string
	Created       int64
	Locked        bool
	Cleaned       bool
	AcceptedNodes []string
	NodeChunkInfo map[string]ChunkRange
	NodeInfo      map[string]NodeInfo
	TweakValues   map[string]TweakValues

	extra      map[string]json.RawMessage
	hasCleaned bool
}

// NewNodeID returns a random 10-character base-36 node id, the shape of
// upstream's Math.random().toString(36).slice(-10).
func NewNodeID() (string, error) {
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

// NewMilestone returns the milestone a node starts from when the remote
// has none (the base milestone of ensureRemoteIsCompatible): id
// MilestoneDocID, created now, unlocked, accepted_nodes [me], empty maps.
// Register (or Lock, Accept) then fills in me's entries. Upstream's
// markRemoteLocked/markRemoteResolved on an absent journal object use
// JournalMilestoneKey as _id and write "cleaned"; set ID accordingly.
func NewMilestone(me string, now time.Time) *Milestone {
	return &Milestone{
		ID:            MilestoneDocID,
		Type:          TypeMilestoneInfo,
		Created:       now.UnixMilli(),
		AcceptedNodes: []string{me},
		NodeChunkInfo: map[string]ChunkRange{},
		NodeInfo:      map[string]NodeInfo{},
		TweakValues:   map[string]TweakValues{},
	}
}

// milestoneKeys are the members Milestone models.
var milestoneKeys = []string{"_id", "_rev", "type", "created", "locked", "cleaned",
	"accepted_nodes", "node_chunk_info", "node_info", "tweak_values"}

// ParseMilestone decodes a milestone document or journal object. It fails
// with engine.ErrMalformed if data is not a JSON object or a modelled
// member has the wrong JSON type (a tweak set must be an object or null).
// It does not check _id or type.
func ParseMilestone(data []byte) (*Milestone, error) {
	m := &Milestone{}
	if err := m.UnmarshalJSON(data); err != nil {
		return nil, err
	}
	return m, nil
}

// UnmarshalJSON decodes like ParseMilestone, replacing *m; on error *m
// is the zero Milestone.
func (m *Milestone) UnmarshalJSON(data []byte) (err error) {
	const what = "milestone"
	*m = Milestone{}
	defer func() {
		if err != nil {
			*m = Milestone{}
		}
	}()
	fields, err := decodeObject(what, data)
	if err != nil {
		return err
	}
	if m.ID, err = decodeString(what, "_id", fields["_id"]); err != nil {
		return err
	}
	if m.Rev, err = decodeString(what, "_rev", fields["_rev"]); err != nil {
		return err
	}
	if m.Type, err = decodeString(what, "type", fields["type"]); err != nil {
		return err
	}
	if m.Created, err = decodeInt(what, "created", fields["created"]); err != nil {
		return err
	}
	if m.Locked, err = decodeBool(what, "locked", fields["locked"]); err != nil {
		return err
	}
	if raw, ok := fields["cleaned"]; ok {
		m.hasCleaned = true
		if m.Cleaned, err = decodeBool(what, "cleaned", raw); err != nil {
			return err
		}
	}
	for _, f := range []struct {
		key string
		dst any
	}{
		{"accepted_nodes", &m.AcceptedNodes},
		{"node_chunk_info", &m.NodeChunkInfo},
		{"node_info", &m.NodeInfo},
		{"tweak_values", &m.TweakValues},
	} {
		raw, ok := fields[f.key]
		if !ok {
			continue
		}
		if err = json.Unmarshal(raw, f.dst); err != nil {
			return fmt.Errorf("negotiate: %s: %s: %v: %w", what, f.key, err, engine.ErrMalformed)
		}
	}
	for _, k := range milestoneKeys {
		delete(fields, k)
	}
	if len(fields) > 0 {
		m.extra = fields
	}
	return nil
}

// MarshalJSON encodes the milestone with upstream's member order, then the
// unmodelled members. _rev is omitted when empty.
func (m Milestone) MarshalJSON() ([]byte, error) {
	var w objWriter
	w.field("_id", m.ID)
	if m.Rev != "" {
		w.field("_rev", m.Rev)
	}
	w.field("type", m.Type)
	w.field("created", m.Created)
	w.field("locked", m.Locked)
	if m.Cleaned || m.hasCleaned {
		w.field("cleaned", m.Cleaned)
	}
	accepted := m.AcceptedNodes
	if accepted == nil {
		accepted = []string{}
	}
	w.field("accepted_nodes", accepted)
	w.field("node_chunk_info", nonNilMap(m.NodeChunkInfo))
	w.field("node_info", nonNilMap(m.NodeInfo))
	w.field("tweak_values", nonNilMap(m.TweakValues))
	w.extras(m.extra)
	return w.bytes("milestone")
}

func nonNilMap[V any](m map[string]V) map[string]V {
	if m == nil {
		return map[string]V{}
	}
	return m
}

// Clone returns a deep copy of m.
func (m *Milestone) Clone() *Milestone {
	c := *m
	c.AcceptedNodes = append([]string(nil), m.AcceptedNodes...)
	if m.NodeChunkInfo != nil {
		c.NodeChunkInfo = make(map[string]ChunkRange, len(m.NodeChunkInfo))
		for k, v := range m.NodeChunkInfo {
			c.NodeChunkInfo[k] = v
		}
	}
	if m.NodeInfo != nil {
		c.NodeInfo = make(map[string]NodeInfo, len(m.NodeInfo))
		for k, v := range m.NodeInfo {
			v.extra = cloneRaw(v.extra)
			c.NodeInfo[k] = v
		}
	}
	if m.TweakValues != nil {
		c.TweakValues = make(map[string]TweakValues, len(m.TweakValues))
		for k, v := range m.TweakValues {
			c.TweakValues[k] = v.Clone()
		}
	}
	c.extra = cloneRaw(m.extra)
	return &c
}

// lastConnectedInterval is how stale node_info[me].last_connected must be
// before a connection rewrites it (60 s in ensureRemoteIsCompatible).
const lastConnectedInterval = 60 * time.Second

// Register is step 3 of ensureRemoteIsCompatible (commonlib
// src/pouchdb/LiveSyncDBFunctions.ts): it records this node in m and
// reports whether the milestone must be written back (PUT on CouchDB,
// upload on object storage). current is this node's tweak values; only its
// TemplateKeys are used, as upstream's extractObject does, and a
// recommended (not must-match) template key current lacks takes its
// NewVaultTweaks value, because the plugin's settings always hold every
// such key: the set written is the plugin's 30 keys even when current is
// an older, must-match-only set. Must-match keys are never filled in.
//
// A write-back is needed when: me's [min,max] differs from my; me's stored
// tweak set differs from current (a template key missing from current,
// such as an unset tweakModified, always counts as a difference, so
// upstream rewrites on every connection until tweakModified is set); m has
// no Rev (new, and always for journal objects, which carry none); there is
// no PREFERRED set; me has no node_info entry or any DeviceInfo field
// differs from info; or now is more than 60 s after last_connected. If so,
// Register sets me's min and max (not current, which only a missing entry
// takes from my), tweak_values[me] = current, and PREFERRED = current if
// absent; last_connected = now is written only under the 60 s rule. When
// no write-back is needed, m is left unchanged.
func (m *Milestone) Register(me string, my ChunkRange, info DeviceInfo, current TweakValues, now time.Time) (changed bool) {
	cur := withRecommended(current)
	r, ok := m.NodeChunkInfo[me]
	if !ok {
		r = my
	}
	stored, hasStored := m.TweakValues[me]
	var storedPtr *TweakValues
	if hasStored {
		storedPtr = &stored
	}
	_, hasPreferred := m.TweakValues[PreferredNode]
	write := r.Min != my.Min || r.Max != my.Max ||
		storedTweaksDiffer(storedPtr, cur) ||
		m.Rev == "" || !hasPreferred

	n, ok := m.NodeInfo[me]
	if !ok {
		n = NodeInfo{} // upstream: {...info, last_connected: 0, progress: ""}
		write = true
	}
	if n.DeviceInfo != info {
		n.DeviceInfo = info
		write = true
	}
	if nowMs := now.UnixMilli(); nowMs-n.LastConnected > lastConnectedInterval.Milliseconds() {
		n.LastConnected = nowMs
		write = true
	}
	if !write {
		return false
	}
	if m.NodeChunkInfo == nil {
		m.NodeChunkInfo = map[string]ChunkRange{}
	}
	if m.NodeInfo == nil {
		m.NodeInfo = map[string]NodeInfo{}
	}
	if m.TweakValues == nil {
		m.TweakValues = map[string]TweakValues{}
	}
	r.Min, r.Max = my.Min, my.Max
	m.NodeChunkInfo[me] = r
	m.NodeInfo[me] = n
	m.TweakValues[me] = cur.Clone()
	if !hasPreferred {
		m.TweakValues[PreferredNode] = cur.Clone()
	}
	return true
}

// Accept is markRemoteResolved (commonlib
// src/replication/couchdb/LiveSyncReplicator.ts, journal
// LiveSyncJournalReplicator.ts): after fetching a rebuilt remote, this node
// adds itself to accepted_nodes (removing duplicates, keeping first
// occurrences) and to node_chunk_info if absent. It does not unlock.
func (m *Milestone) Accept(me string, my ChunkRange) {
	m.ensureRange(me, my)
	seen := map[string]bool{}
	var nodes []string
	for _, n := range append(m.AcceptedNodes, me) {
		if !seen[n] {
			seen[n] = true
			nodes = append(nodes, n)
		}
	}
	m.AcceptedNodes = nodes
}

// Lock is markRemoteLocked(locked=true): accepted_nodes becomes [me] (every
// other node must Accept after fetching), me joins node_chunk_info if
// absent, and cleaned becomes true if cleaned is set (it is never cleared).
func (m *Milestone) Lock(me string, my ChunkRange, cleaned bool) { m.setLocked(me, my, true, cleaned) }

// Unlock is markRemoteLocked(locked=false). As upstream, it also resets
// accepted_nodes to [me] and leaves cleaned as it was.
func (m *Milestone) Unlock(me string, my ChunkRange) { m.setLocked(me, my, false, false) }

func (m *Milestone) setLocked(me string, my ChunkRange, locked, cleaned bool) {
	m.ensureRange(me, my)
	m.AcceptedNodes = []string{me}
	m.Locked = locked
	m.Cleaned = m.Cleaned || cleaned
	m.hasCleaned = true
}

func (m *Milestone) ensureRange(me string, my ChunkRange) {
	if m.NodeChunkInfo == nil {
		m.NodeChunkInfo = map[string]ChunkRange{}
	}
	if _, ok := m.NodeChunkInfo[me]; !ok {
		m.NodeChunkInfo[me] = my
	}
}

// NodeInfoDoc is the local-only document NodeInfoDocID that holds this
// device's node id ({type:"nodeinfo", nodeid, v20220607:true}).
type NodeInfoDoc struct {
	ID        string `json:"_id"`
	Rev       string `json:"_rev,omitempty"`
	Type      string `json:"type"`
	NodeID    string `json:"nodeid"`
	V20220607 bool   `json:"v20220607,omitempty"`
}

// SyncInfo is the obsolete replicated "syncinfo" document:
// Data is 30 random ASCII letters, encrypted like a chunk ("%=…", Encrypted
// set) when E2EE is on. Upstream no longer writes or checks it; readers
// skip it.
type SyncInfo struct {
	ID        string `json:"_id"`
	Rev       string `json:"_rev,omitempty"`
	Type      string `json:"type"`
	Data      string `json:"data"`
	Encrypted bool   `json:"e_,omitempty"`
}
