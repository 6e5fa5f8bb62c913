package negotiate

// Document ids, object keys and version numbers of the negotiation
// documents (commonlib src/common/models/db.const.ts, sync.definition.ts,
// shared.const.behabiour.ts, tweak.definition.ts,
// src/replication/journal/LiveSyncJournalReplicator.ts). The misspelling
// "obsydian" in three of them is part of the wire format and permanent;
// the sync-parameters id is spelled correctly.
const (
	// VersionDocID is the id of the replicated versioning document.
	VersionDocID = "obsydian_livesync_version"
	// MilestoneDocID is the id of the CouchDB milestone document. It is also
	// the _id inside a journal milestone object written by the compatibility
	// check, because upstream builds that object from the same template.
	MilestoneDocID = "_local/" + MilestoneLocalID
	// NodeInfoDocID is the id of the local-only document that holds this
	// device's node id; it never leaves the local database.
	NodeInfoDocID = "_local/" + NodeInfoLocalID
	// SyncInfoID is the id of the obsolete "can I decrypt" document.
	SyncInfoID = "syncinfo"
	// SyncParametersDocID is the id of the sync-parameters document. The
	// journal object keeps this _id in its body (inherited from upstream's
	// DEFAULT_SYNC_PARAMETERS).
	SyncParametersDocID = "_local/" + SyncParametersLocalID
	// MilestoneLocalID, NodeInfoLocalID and SyncParametersLocalID are
	// those documents' ids in a store's _local namespace, which keeps
	// _local ids without the "_local/" prefix.
	MilestoneLocalID      = "obsydian_livesync_milestone"
	NodeInfoLocalID       = "obsydian_livesync_nodeinfo"
	SyncParametersLocalID = "obsidian_livesync_sync_parameters"
	// JournalSyncParametersKey is the object key (below the bucket prefix)
	// of the sync parameters on object storage. It is never encrypted.
	JournalSyncParametersKey = "_obsidian_livesync_journal_sync_parameters.json"
	// JournalMilestoneKey is the object key (below the bucket prefix) of
	// the milestone on object storage. It is never encrypted. Upstream
	// writes it as the _id only when markRemoteLocked/markRemoteResolved
	// create the object; the compatibility check writes MilestoneDocID.
	JournalMilestoneKey = "_00000000-milestone.json"

	// DatabaseVersion is upstream's VER: the database format version this
	// engine speaks (12 since HKDF encryption, LiveSync 0.25.0).
	DatabaseVersion = 12
	// ProtocolVersionLegacy is ProtocolVersions.LEGACY of sync parameters.
	ProtocolVersionLegacy = 1
	// ProtocolVersionAdvancedE2EE is ProtocolVersions.ADVANCED_E2EE, the
	// value upstream writes. Upstream never validates it.
	ProtocolVersionAdvancedE2EE = 2
	// PreferredNode is upstream's DEVICE_ID_PREFERRED: the key of
	// tweak_values that holds the vault-wide preferred tweak set.
	PreferredNode = "PREFERRED"

	// SaltSize is the length in bytes of the PBKDF2 salt upstream creates.
	SaltSize = 32

	// TypeVersionInfo is the type of the versioning document (EntryTypes
	// in db.const.ts, as are the following).
	TypeVersionInfo = "versioninfo"
	// TypeSyncInfo is the type of the obsolete syncinfo document.
	TypeSyncInfo = "syncinfo"
	// TypeSyncParameters is the type of the sync-parameters document.
	TypeSyncParameters = "sync-parameters"
	// TypeMilestoneInfo is the type of the milestone document.
	TypeMilestoneInfo = "milestoneinfo"
	// TypeNodeInfo is the type of the local node-info document.
	TypeNodeInfo = "nodeinfo"
)

// ChunkRange is one node's supported chunk-format range in a milestone's
// node_chunk_info ({min, max, current}). Compatibility needs the [Min,Max]
// ranges of all accepted nodes to intersect.
type ChunkRange struct {
	Min     int64 `json:"min"`
	Max     int64 `json:"max"`
	Current int64 `json:"current"`
}

// Chunk ranges that upstream's replicators announce (currentVersionRange in
// commonlib src/replication/couchdb/LiveSyncReplicator.ts and
// src/replication/journal/LiveSyncJournalReplicator.ts).
var (
	// CouchDBChunkRange is the range a CouchDB client announces.
	CouchDBChunkRange = ChunkRange{Min: 0, Max: 2400, Current: 2}
	// JournalChunkRange is the range an object-storage client announces.
	JournalChunkRange = ChunkRange{Min: 0, Max: 2, Current: 2}
)
