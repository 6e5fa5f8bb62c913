// Package setupuri reads the Setup URIs of Self-hosted LiveSync, the
// strings the plugin's "Copy settings as a new Setup URI" command gives a
// user, so that a user can open a vault with what the plugin already
// gave them:
//
//	obsidian://setuplivesync?settings=<URI-encoded encrypted settings>
//
// The encrypted part is the plugin's settings object
// (ObsidianLiveSyncSettings, commonlib src/common/models/setting.type.ts)
// as JSON, encrypted with a setup passphrase by upstream's encryptString:
// "%$" data today, or the older "%" and `["…"]` forms that
// e2ee.DecryptSetupString also reads (commonlib src/API/processSetting.ts
// encodeSettingsToSetupURI and decodeSettingsFromSetupURI).
//
// Parse takes the whole URI or the bare encrypted string and the setup
// passphrase and returns a Config: the remote (CouchDB, S3-compatible
// object storage, or P2P only), the vault's format settings as a
// livesync.Settings, the on-demand chunk settings, and the whole decrypted
// object as Raw so that keys this package does not model are kept.
// FromJSON does the same for a settings object that is already in clear;
// Encode makes a URI the plugin accepts.
//
// # Errors
//
// A wrong setup passphrase (or altered data) wraps engine.ErrDecrypt; a
// string that is not a Setup URI, bad escapes, or settings that are not a
// JSON object or have a known key of the wrong JSON type wrap
// engine.ErrMalformed; the compact QR form and settings the engine cannot
// use (an unknown hash algorithm, say) wrap engine.ErrUnsupported. Unknown
// keys are never an error. Error messages name keys, never values, so
// they carry no passwords, passphrases or keys; Config and its parts
// print with secrets redacted.
package setupuri
