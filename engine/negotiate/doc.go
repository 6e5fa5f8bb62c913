// Package negotiate implements the documents a LiveSync client reads and
// writes before it syncs with a remote, and the verdicts it draws from
// them, byte-compatible with the Self-hosted LiveSync plugin (FORMAT.md
// §1.5–§1.8, §5.2, §5.4, §5.5, §6.5; upstream behaviour, quirks included,
// is the specification). It does no I/O: callers fetch and store the
// documents through their transport and feed them in, together with the
// current time, so every decision is deterministic.
//
// The documents:
//
//   - VersionDoc, the replicated "obsydian_livesync_version" document
//     (CouchDB only), judged by CheckVersion.
//   - SyncParameters, which carries the vault's PBKDF2 salt: the _local
//     document on CouchDB, an unencrypted object on object storage.
//     NeedsNewSalt says when a salt may be created (only when the document
//     is proven absent or its salt is empty, never after a failed read);
//     JournalEpoch derives the bucket-lifetime identity from it.
//   - Milestone, the registry of nodes, locks, chunk-format ranges and
//     tweak values (TweakValues) per node and PREFERRED.
//
// A pre-sync handshake (FORMAT.md §5.2) with this package:
//
//	// 1. Sync parameters (before any replication).
//	doc, err := readSyncParameters()                  // *SyncParameters, err wraps engine.ErrNotFound if absent
//	if need, err := negotiate.NeedsNewSalt(doc, err); err != nil {
//		return err                                     // never create a salt after a failed read
//	} else if need {
//		salt, err := negotiate.NewSalt(nil)
//		// write negotiate.NewSyncParameters(salt) (keeping doc's _rev), then read again
//	}
//	salt, err := doc.Salt()
//
//	// 2. Database version (CouchDB).
//	switch v, err := negotiate.CheckVersion(versionDoc); v {
//	case negotiate.VersionCreate, negotiate.VersionMigrate: // write negotiate.NewVersionDoc() (with the old _rev)
//	case negotiate.VersionIncompatible:
//		return err
//	}
//
//	// 3. Milestone.
//	m := remoteMilestone                               // nil if absent
//	if m == nil {
//		m = negotiate.NewMilestone(me, now)
//	}
//	if m.Register(me, negotiate.CouchDBChunkRange, device, tweaks, now) {
//		// write m back (json.Marshal(m))
//	}
//	v := negotiate.Check(m, me, negotiate.CouchDBChunkRange, tweaks, negotiate.CheckOptions{})
//	if err := v.Err(); err != nil {
//		return err                                     // errors.Is(err, negotiate.ErrTweakMismatch) …
//	}
//
// Lock, Unlock and Accept implement upstream's markRemoteLocked and
// markRemoteResolved for rebuilding a remote.
//
// All parsers accept any input without panicking and fail with errors
// wrapping engine.ErrMalformed; values this package does not model are
// kept so that documents written by the plugin round-trip without loss.
// No error message contains a salt.
package negotiate
