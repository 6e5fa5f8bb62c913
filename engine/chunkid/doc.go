// Package chunkid computes the ids of LiveSync chunk ("leaf") documents,
// byte for byte as the Self-hosted LiveSync plug-in does, for every hash
// algorithm a vault can be configured with and with or without end-to-end
// encryption (engine/FORMAT.md §3.5; commonlib src/managers/HashManager/*,
// src/managers/EntryManager/EntryManagerImpls.ts prepareChunk).
//
// A chunk id is "h:" followed by a hash of the piece, or "h:+" followed by
// a hash keyed with the passphrase when the vault's E2EE setting is on.
// Which hash is selected by the vault setting hashAlg (HashAlg here).
//
// Usage: build one Hasher per vault configuration and call ID for every
// piece the splitter produced; a Hasher is immutable and safe for
// concurrent use:
//
//	h, err := chunkid.New(chunkid.XXHash64, settings.Encrypt, settings.Passphrase)
//	if err != nil { ... } // errors.Is(err, engine.ErrUnsupported)
//	id := h.ID(piece) // "h:37me21jj44pcc"
//
// # Strings
//
// LiveSync hashes JavaScript strings: their length is counted in UTF-16
// code units and they are hashed as their UTF-8 encoding (or, for the
// pure-JS hash, as UTF-16 code units). This package receives Go strings
// and maps them to JavaScript strings the way Go converts a string to
// []rune: valid UTF-8 is decoded as is and every byte that is not part of
// a valid UTF-8 sequence becomes U+FFFD (one code unit, hashed as EF BF
// BD). Pieces produced by the splitters are valid UTF-8 text or base64,
// for which the mapping is exact. A JavaScript string holding a lone
// surrogate cannot be represented in valid UTF-8 and therefore has no Go
// counterpart here (none occurs in LiveSync's own pieces: text pieces are
// decoded from UTF-8).
//
// The building blocks are exported for other packages that need the
// same primitives: MixedHash and MixedEach (octagonal-wheels
// src/hash/purejs.ts, also used for the P2P room password) and XXH32.
package chunkid
