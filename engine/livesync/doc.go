// Package livesync is the Self-hosted LiveSync document format as one
// codec: it turns a file into the documents the plugin writes (a
// metadata document and its chunks) and back, and converts documents
// between the local form every replica keeps (plaintext) and the remote
// form a CouchDB remote holds (encrypted chunks, obfuscated metadata,
// compressed data). It composes the format's parts: document ids
// (engine/docid), splitting (engine/chunk), chunk ids (engine/chunkid)
// and end-to-end encryption (engine/e2ee). engine/FORMAT.md §1 (document
// shapes), §3 (chunking), §4 (encryption and compression) specify it.
//
// # Use
//
//   - New builds a Codec from the vault's Settings (the must-match tweak
//     values and the passphrase) and the remote's PBKDF2 salt.
//   - Codec.FileDocs: a file's path, bytes and times -> its Meta and
//     Chunks (chunks first: the plugin persists every chunk before the
//     metadata that names it).
//   - ReadFile: a Meta and a way to get chunk data -> the file's bytes,
//     checked against the recorded size; legacy inline notes and binary
//     encodings are read too.
//   - Codec.EncodeRemote and Codec.DecodeRemote: one document between
//     the local and the remote form.
//   - ParseDoc, ParseMeta and ParseChunk read documents; Meta.Doc and
//     ChunkDoc write them.
//   - Settings.TweakValues and FromTweakValues carry the settings through
//     a remote's milestone (engine/negotiate).
//
// A Codec is safe for concurrent use; the E2EE key is derived once per
// passphrase and salt. JSON that is encrypted is written as JavaScript's
// JSON.stringify writes it, so ciphertexts match the plugin's byte for
// byte. Errors wrap the sentinels of package engine (ErrMalformed,
// ErrDecrypt, ErrSizeMismatch, ErrUnsupported, ErrNotFound) and never
// contain note contents, passphrases or keys.
package livesync
