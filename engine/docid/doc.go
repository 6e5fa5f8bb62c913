// Package docid maps vault paths to LiveSync document ids and back, and
// classifies ids by kind.
//
// Every file LiveSync synchronises is described by a metadata document
// whose _id is derived from the file's path (commonlib
// src/string_and_binary/path.ts path2id_base, called through
// src/services/base/PathService.ts path2id):
//
//   - the part after the last ':' is normalised the way the headless path
//     service does it (src/services/implements/injectable/
//     InjectablePathService.ts): '\' becomes '/', runs of '/' collapse;
//   - a path that already starts with "f:" is returned as it is;
//   - unless the vault is case-sensitive, the whole path is lower-cased
//     with JavaScript toLowerCase (package jsstring);
//   - without path obfuscation a path starting with '_' gets a '/'
//     prepended (CouchDB reserves '_' ids) and is the id;
//   - with path obfuscation the id is "[prefix:]f:" followed by the hex
//     SHA-256 of hex(SHA-256(passphrase)) + ":" + the lower-cased path.
//
// Use New once per vault configuration and call (*Mapper).FromPath for
// each path; FromPath and HiddenFileID are conveniences that build a
// Mapper per call. ToPath reverses the mapping where that is possible
// without the document's own path field. IsChunkID, IsSystemID,
// IsObfuscated and IsHiddenFileID classify ids the way readers skip or
// route documents; IsTargetPath is LiveSync's fixed rule for paths that
// are never synchronised.
//
// Obsidian's own normalizePath additionally trims slashes, replaces
// no-break spaces and NFC-normalises; callers that need ids identical to
// the Obsidian app must apply that before calling FromPath. The headless
// rule implemented here is what the LiveSync CLI and the test vectors use.
package docid
