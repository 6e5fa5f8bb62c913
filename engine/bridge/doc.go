// Package bridge connects one database to its upstreams: CouchDB
// databases and journal buckets it replicates with continuously, and
// the chunk sources of its purgatory hunt. It is the relay's bridging as
// a library, transport-neutral (the upstreams are ports, implemented by
// adapters/couchdb and adapters/minio) and free of configuration.
//
// What the database keeps and what crosses an upstream boundary:
//
// The database (Local) keeps the REMOTE form of a vault, exactly as
// clients push it: chunks encrypted ({"_id":"h:+…","data":"%$…","e_":true}),
// metadata obfuscated, revisions as sent. The engine's chunk sources and
// journal packs speak the LOCAL plaintext form. The bridge therefore
// never hands the engine's plaintext to the database:
//
//   - A CouchDB upstream with the database's salt stores the same
//     remote form: documents are forwarded as they are, in both
//     directions, and its hunt source fetches the raw documents
//     (Upstream.Docs) without decoding them.
//   - A CouchDB upstream with another salt (possible only with the vault
//     passphrase) is re-encrypted at the boundary (decorate.Recode); the
//     revisions stay the same.
//   - A bucket upstream (a journal) holds the plaintext form in its packs:
//     the journal runs over decorate.CodecView of the database, which
//     decodes what it reads and encodes what it writes with the
//     database's codec, so the passphrase is required (or the vault
//     declared unencrypted, Upstream.Plain).
//
// The hunt's chunk sources return RawChunk values: whole chunk documents
// in the database's remote form, with their _rev, which the hunt's local
// side writes with new_edits=false.
//
// Loops end by themselves: a document pulled from upstream B and pushed
// to upstream C keeps its revision, so C's replication back finds it
// present (RevsDiff), and a journal never sends back what it received.
//
// Identity: CouchDB answers instance_start_time "0" on CouchDB 2+, so it
// cannot tell a recreated database from the old one. The bridge writes a
// marker of its own on each CouchDB upstream (a random id in a _local
// document) and remembers it in the database with the upstream's
// update_seq and a fingerprint of its salt. A marker gone, or an integer
// update_seq lower than remembered, is a reset: replication starts again
// from zero in both directions (the marker is part of the replication
// id). A salt other than the one remembered is a re-key: the bridge
// refuses before writing anything. A bucket's reset is a new journal
// epoch.
//
// Vault settings: the bridge keeps the vault-wide parts of the milestone
// (PREFERRED tweak values, the lock) the same on the database and on
// every upstream (negotiate.Reconcile); the per-node entries stay each
// remote's. A database without a PREFERRED set adopts the first
// upstream's; an upstream that disagrees on a must-match key is not
// overwritten and does not replicate.
package bridge
