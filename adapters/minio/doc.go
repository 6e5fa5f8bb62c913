// Package minio stores a Self-hosted LiveSync journal in an
// S3-compatible bucket (AWS S3, MinIO, Cloudflare R2, versitygw, ...)
// through minio-go v7.
//
// New returns a *Bucket: one bucket under one prefix. It implements
// engine/journalsync.Objects (List, Get, Put, Prefix, ID) and adds
//
//   - Negotiate, the bucket's negotiate.Port (the sync-parameters and
//     milestone objects with their ETags), and Handshake, the pre-sync
//     handshake of a journal (negotiate.Handshake; commonlib
//     LiveSyncJournalReplicator.ts): the vault's salt from the
//     sync-parameters object, then the milestone object registered and
//     judged, with typed errors that say what to do.
//     HandshakeParams is the same handshake returning a HandshakeResult,
//     which adds the sync parameters and the journal epoch
//     (journalsync.Config.Epoch) without another request;
//   - GetSyncParameters / EnsureSyncParameters for the never-encrypted
//     sync-parameters object (the PBKDF2 salt). A new salt is written only
//     when the object is proven absent (S3 NoSuchKey) or holds an empty
//     salt; any other failure to read it (auth, network, a missing bucket,
//     a malformed body) is returned and nothing is written
//     (obsidian-livesync issue #1147). The salt is created with a conditional PutObject
//     (If-None-Match: *), so concurrent first clients end with one salt;
//   - GetMilestone / PutMilestone for the milestone object (raw JSON);
//   - PutPack / GetPack, a pack sealed with journal.Seal / opened with
//     journal.Open;
//   - through Remote (NewRemote), a vault.Remote, and through Doctor, a
//     read-only diagnosis of the bucket returning vault findings.
//
// List returns the pack keys after a given key, following continuation
// tokens past the 1,000 keys of one S3 page (upstream lists one page
// only), skipping names that start with "_" and ordered as upstream orders
// them (journal.ComparePackKeys).
//
// S3 has no atomic rename, so a pack cannot be written to a temporary key
// and renamed; a single PutObject is atomic instead: readers see either no
// object or the whole body, never a partial one. Put therefore uploads
// every object with exactly one PutObject (multipart disabled) under its
// final key, with a Content-MD5 the server checks, so an interrupted
// upload leaves no object.
//
// Put is create-only, as journalsync.Objects requires: it sends
// If-None-Match: *, and an existing key (412 PreconditionFailed, or 409
// ConditionalRequestConflict) is an error wrapping journalsync.ErrExists
// that leaves the stored object as it was, so two devices that name a pack
// with the same millisecond do not overwrite each other (upstream's plain
// PutObject does). AWS S3 (since August 2024), Cloudflare R2 and recent
// MinIO releases document the header; versitygw v1.8.0, the test server,
// enforces it (tests/minio_create_test.go). A server that ignores it
// replaces the object as upstream always does, and a pack can then be
// lost when two devices send in the same millisecond. PutObject is the unconditional
// write, for tools that must replace an object.
//
// # Connecting
//
// Config.Endpoint is "host[:port]" (with Config.Secure for HTTPS) or a URL
// "https://host[:port]". Path-style requests (https://host/bucket/key)
// are what self-hosted servers expect; virtual-host style
// (https://bucket.host/key) is forced with Config.VirtualHost, and is the
// default for AWS S3 itself. Config.Region is the signing region; empty
// asks the server (GetBucketLocation). A self-signed or private-CA
// certificate is trusted with Config.CACertPEM.
//
// # Errors and retries
//
// Errors are *engine.Error: StageAuth for 401/403, InvalidAccessKeyId,
// SignatureDoesNotMatch, AccessDenied, a wrong signing region and a
// skewed clock (permanent; the message says what to check); StageTransport
// for network failures, 5xx, 408, 429 and the S3 throttling codes
// (transient); StageProtocol for a TLS misconfiguration (ErrTLS) or an
// endpoint that is not S3; StageStorage otherwise. NoSuchKey wraps
// engine.ErrNotFound; NoSuchBucket wraps ErrNoBucket, engine.ErrNoDatabase
// and engine.ErrNotFound, and the message names the bucket. A cancelled
// context gives ctx.Err() (wrapped). Messages never contain the secret
// key, salts or object contents.
//
// An error a setting can fix wraps a *SettingError naming the Config field
// (Setting) and, for a wrong region, the region the server wants (Want):
// an unknown access key, a signature mismatch (the secret key), the
// region, an untrusted certificate (CACertPEM), HTTPS against a plain
// HTTP endpoint (Secure), and every error of Validate and New. Messages
// describe the problem without naming Go fields, so that a program can put
// the fix in its own words: its flag, URL part or configuration key.
//
// Every operation retries transient errors by Config.Retry (by default 4
// attempts, waiting 1.1 s, 2.1 s, 3.1 s, as upstream's S3 client does) and
// returns the others at once; minio-go's own retry loop is disabled
// (MaxRetries 1), so the policy is this package's alone.
package minio
