// Package journal reads and writes the objects of LiveSync's object-storage
// replicator ("journal sync", engine/FORMAT.md §6): the journal packs
// "<ms>-docs.jsonl.gz", and the names of the two fixed objects beside them.
// It mirrors commonlib src/replication/journal/JournalSyncCore.ts
// (serializeDoc, the receive transform and _getRemoteJournals) and
// src/common/utils.ts (escapeNewLineFromString, unescapeNewLineFromString).
//
// A pack is built in three layers, each with its own function:
//
//	records --EncodePack--> payload --Deflate--> compressed --Cipher.EncryptBinary--> object
//	object  --Cipher.DecryptBinary--> compressed --Inflate--> payload --DecodePack--> records
//
// Seal and Open run all three layers; a nil Cipher means the vault does
// not encrypt (the object is then the raw DEFLATE stream). The payload is
// a sequence of records, each terminated by a line feed: a chunk as
// "~" + id + U+001F + data, any other document as its compact JSON.
//
// Typical reader (engine/FORMAT.md §6.4):
//
//	keys = listing with names starting "_" dropped, sorted with ComparePackKeys
//	for each key: recs, err := journal.Open(key, object, cipher, 0)
//	    chunks (r.IsChunk()): store only if the id is absent locally
//	    documents: revsDiff on (r.ID, _rev), then store the missing ones with
//	    new_edits=false using the carried _revisions
//	    remember r.Key() so the same record is never sent back
//
// Typical writer: chunk records first, then documents (each with _rev and
// _revisions), Seal, upload under PackKey(prefix, now). Upstream flushes a
// pack when it holds more than 250 records or more than 10 MiB of payload.
//
// Where this package differs from upstream, on purpose:
//
//   - A chunk line is split at its first U+001F. Upstream splits at every
//     U+001F and keeps only the second field, so it truncates chunk data
//     that contains U+001F; this package keeps the rest of the line. The
//     encoder writes such data as upstream does (there is no escape for
//     U+001F), so an upstream reader still truncates it.
//   - Chunk data that contains no line break but starts with the two
//     characters `\f` is written raw by upstream, and its own reader then
//     strips the `\f` and unescapes the rest, corrupting the data. This
//     encoder writes such data in the escaped form instead, which both this
//     reader and the upstream reader decode to the original data. Decoding
//     follows upstream exactly, so a raw upstream record of that kind is
//     read as upstream reads it.
//   - Upstream silently drops bytes after the last line feed, replaces
//     invalid UTF-8 with U+FFFD and accepts an empty chunk id; this package
//     rejects all three as malformed (upstream writers never produce them).
//   - Inflated output is bounded (see Inflate); upstream has no bound.
//
// Errors: encoding, decoding and opening return *engine.Error with the
// Stage that failed (StageEncode, StageEncrypt, StageDecrypt, StageDecode)
// and the object key as DocID when one is given. Problems with a record
// carry a *ParseError naming the line; every error wraps a sentinel of
// package engine (ErrMalformed, ErrDecrypt) or ErrTooLarge. Error texts
// never contain note content, passphrases or keys.
//
// The functions are pure and safe for concurrent use; none of them panics
// on any input.
package journal
