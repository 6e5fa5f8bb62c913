package docid

import "strings"

// IsChunkID reports whether id names a chunk ("leaf") document: it starts
// with "h:" (commonlib src/common/typeUtils.ts isChunk). E2EE-keyed chunk
// ids ("h:+…") are chunk ids too.
func IsChunkID(id string) bool {
	return strings.HasPrefix(id, PrefixChunk)
}

// IsSystemID reports whether id names a document that is not a file and
// that readers skip when materialising files: the version document, the
// legacy syncinfo document, design documents ("_design…", the prefix test
// of plugin src/modules/core/ReplicateResultProcessor.ts) and local
// documents ("_local/…").
func IsSystemID(id string) bool {
	return id == VersionDocID || id == SyncInfoID ||
		strings.HasPrefix(id, "_design") || strings.HasPrefix(id, "_local/")
}

// IsObfuscated reports whether id is an obfuscated file id, "f:…" or
// "<prefix>:f:…" (such as "i:f:…"), whose path can only be read from the
// document (commonlib path.ts id2path_base refuses "f:" ids).
func IsObfuscated(id string) bool {
	if strings.HasPrefix(id, PrefixObfuscated) {
		return true
	}
	i := strings.IndexByte(id, ':')
	return i >= 0 && strings.HasPrefix(id[i+1:], PrefixObfuscated)
}

// IsHiddenFileID reports whether id belongs to Hidden File Sync: it starts
// with "i:" (commonlib src/common/typeUtils.ts isInternalMetadata),
// whether obfuscated ("i:f:…") or not. Customisation Sync ids ("ix:…") are
// not hidden-file ids.
func IsHiddenFileID(id string) bool {
	return strings.HasPrefix(id, PrefixHiddenFile)
}

// IsTargetPath reports whether LiveSync may synchronise the file at path
// (a path with its namespace prefix, as stored in a document's path
// field), ignoring the user's regular-expression filters and the size
// limit. It combines commonlib src/managers/EntryManager/EntryManagerImpls.ts
// isTargetFile and src/string_and_binary/path.ts shouldBeIgnored:
//
//   - after one leading "i:" is removed, "ix:…" and "ps:…" are targets;
//     any other path still containing ':' is not;
//   - a path starting with '.' is a target only when syncHiddenFiles (the
//     plug-in's syncInternalFiles, Hidden File Sync) is on;
//   - the flag files "redflag.md", "redflag2.md", "redflag3.md",
//     "flag_rebuild.md", "flag_fetch.md" and names starting with
//     "livesync_log_" or "LIVESYNC_LOG_" (compared with the whole path, so
//     only at the vault root) are never targets.
func IsTargetPath(path string, syncHiddenFiles bool) bool {
	switch path {
	case "redflag.md", "redflag2.md", "redflag3.md", "flag_rebuild.md", "flag_fetch.md":
		return false
	}
	if strings.HasPrefix(path, "livesync_log_") || strings.HasPrefix(path, "LIVESYNC_LOG_") {
		return false
	}
	file := strings.TrimPrefix(path, PrefixHiddenFile)
	if strings.HasPrefix(file, PrefixCustomization) || strings.HasPrefix(file, PrefixPluginContainer) {
		return true
	}
	if strings.Contains(file, ":") {
		return false
	}
	if !syncHiddenFiles && strings.HasPrefix(file, ".") {
		return false
	}
	return true
}
