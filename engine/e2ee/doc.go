// Package e2ee implements LiveSync's end-to-end encryption byte for byte:
// the current HKDF scheme ("E2EE V2"), the "%$" variant with an embedded
// salt used by Setup URIs, and the legacy family (V1 "%", V3 "%~", the
// oldest JSON form, deterministic V1 path obfuscation) that older vaults
// still contain. The behaviour follows octagonal-wheels src/encryption/*
// and commonlib src/pouchdb/encryption.ts; engine/FORMAT.md §4 summarises them.
//
// # V2 in one paragraph
//
// A vault has a passphrase and a random 32-byte PBKDF2 salt (stored in
// the sync-parameters document). The master key is PBKDF2-HMAC-SHA256
// (passphrase, salt, 310000 iterations, 32 bytes) — see DeriveKey. Each
// message draws a 32-byte HKDF salt and a 12-byte IV; its key is
// HKDF-SHA256(master, hkdfSalt, no info); the cipher is AES-256-GCM with no
// associated data. Strings are "%=" + base64(iv | hkdfSalt | ct | tag);
// journal packs use the same bytes without prefix and base64.
//
// # Use
//
//	c := e2ee.New(passphrase, salt, e2ee.Options{})  // V2, crypto/rand
//	s, err := c.EncryptString("chunk data")          // "%=..."
//	p, err := c.DecryptString(s)                     // also legacy "%..." data
//	b, err := c.EncryptBinary(pack)                  // journal pack body
//
// New derives nothing until a key is needed; DeriveKey caches master keys
// process-wide, so creating many Ciphers for the same vault is cheap and
// decrypting thousands of chunks runs PBKDF2 once. A host that derives the
// master key itself (WebCrypto in the js/wasm build) passes it to
// KeyFromMaster and NewWithKey, or installs its deriver for every
// derivation of the process with SetPBKDF2. Options.Algorithm mirrors upstream's
// E2EEAlgorithm setting; convert it with ParseAlgorithm, because the zero
// value of Algorithm is V2 whereas upstream's empty string means legacy
// V1. Options.Rand makes the output deterministic for tests: a V2 message
// reads its HKDF salt first, then its IV.
//
// # Errors
//
// Every error wraps one sentinel of package engine: ErrDecrypt when
// authentication fails (wrong passphrase or salt, altered or truncated
// ciphertext), ErrMalformed for input that is not well-formed (empty, bad
// base64 or hex, shorter than its header and tag), ErrUnsupported for a
// marker or setting this reader does not accept. Messages never contain
// passphrases, keys, salts, plaintext or ciphertext. No input panics.
//
// A Cipher is safe for concurrent use. Decrypting a V2 string allocates
// the AES/GCM state and the result only; scratch buffers are pooled.
package e2ee
