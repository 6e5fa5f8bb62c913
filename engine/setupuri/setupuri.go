package setupuri

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"strings"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/e2ee"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
)

// Prefix starts every Setup URI (upstream configURIBase).
const Prefix = "obsidian://setuplivesync?settings="

// PrefixQR starts the compact QR-code form (upstream configURIBaseQR),
// which this package does not read.
const PrefixQR = "obsidian://setuplivesync?settingsQR="

// RemoteType is upstream's remoteType setting, in upstream's spelling.
type RemoteType string

// Remote types (commonlib src/common/models/setting.const.ts RemoteTypes).
// Other values are kept as they are; a caller that cannot use them says so.
const (
	RemoteCouchDB RemoteType = ""         // REMOTE_COUCHDB, the default
	RemoteS3      RemoteType = "MINIO"    // REMOTE_MINIO: S3-compatible object storage
	RemoteP2P     RemoteType = "ONLY_P2P" // REMOTE_P2P
)

// CouchDB is the CouchDB connection of the settings (upstream
// CouchDBConnection). Password is a secret.
type CouchDB struct {
	URI           string // couchDB_URI, the server's base URL
	User          string // couchDB_USER
	Password      string // couchDB_PASSWORD
	Database      string // couchDB_DBNAME
	CustomHeaders string // couchDB_CustomHeaders, upstream's "Name: value" lines
	UseJWT        bool   // useJWT: authenticate with a JWT (its settings stay in Config.Raw)
	UseRequestAPI bool   // useRequestAPI: the plugin sends requests through the host's requestUrl
}

// S3 is the object-storage connection of the settings (upstream
// BucketSyncSetting). SecretKey is a secret.
type S3 struct {
	Endpoint                string // endpoint
	AccessKey               string // accessKey
	SecretKey               string // secretKey
	Bucket                  string // bucket
	Prefix                  string // bucketPrefix, for example "my-vault/"
	Region                  string // region; upstream's default is "auto"
	ForcePathStyle          bool   // forcePathStyle; true when absent, as upstream's default
	UseCustomRequestHandler bool   // useCustomRequestHandler
	CustomHeaders           string // bucketCustomHeaders
}

// Chunks holds the on-demand chunk retrieval settings (upstream
// OnDemandChunkSettings), with upstream's defaults for absent keys.
type Chunks struct {
	ReadOnline        bool // readChunksOnline; default true
	OnlyLocal         bool // useOnlyLocalChunk
	Concurrency       int  // concurrencyOfReadChunksOnline; default 40
	MinimumIntervalMS int  // minimumIntervalOfReadChunksOnline, in ms; default 50
}

// Config is what a Setup URI says about a vault.
type Config struct {
	// RemoteType selects which of CouchDB and S3 applies.
	RemoteType RemoteType
	CouchDB    CouchDB
	S3         S3
	// Vault are the format settings, upstream's spellings mapped as
	// livesync.FromTweakValues does; Vault.Passphrase is the E2EE
	// passphrase (passphrase), which may be empty even when encryption is
	// on if the caller is to supply it: call Validate before opening.
	Vault  livesync.Settings
	Chunks Chunks
	// DeviceName is deviceAndVaultName.
	DeviceName string
	// DatabaseSuffix is additionalSuffixOfDatabaseName, which upstream
	// appends to the local database's name.
	DatabaseSuffix string
	// Raw is the whole decrypted settings object, with every key,
	// including those not modelled here and all secrets. Never log it.
	Raw json.RawMessage
}

// Validate reports settings that cannot open a vault: a format setting
// the engine does not know, or encryption or path obfuscation without a
// passphrase (engine.ErrUnsupported).
func (c *Config) Validate() error { return c.Vault.Validate() }

// Parse decrypts a Setup URI (the whole obsidian:// URI, or the bare
// encrypted string, URI-encoded or not; surrounding spaces are ignored)
// with the setup passphrase and reads it as FromJSON does.
func Parse(uri, setupPassphrase string) (*Config, error) {
	return parse(uri, setupPassphrase, e2ee.DecryptSetupString)
}

func parse(uri, pass string, decrypt func(s, pass string) (string, error)) (*Config, error) {
	enc, err := Unwrap(uri)
	if err != nil {
		return nil, err
	}
	plain, err := decrypt(enc, pass)
	if err != nil {
		if errors.Is(err, engine.ErrDecrypt) {
			return nil, fmt.Errorf("setupuri: cannot decrypt the settings (wrong setup passphrase?): %w", err)
		}
		return nil, fmt.Errorf("setupuri: cannot decrypt the settings: %w", err)
	}
	return FromJSON([]byte(plain))
}

// Unwrap returns the encrypted settings string of a Setup URI: it strips
// Prefix and undoes the URI encoding as JavaScript's decodeURIComponent
// does ("+" stays "+"). A bare string is returned decoded if it is
// URI-encoded ("%25…", "%5B…") and as it is otherwise. Errors wrap
// engine.ErrMalformed, or engine.ErrUnsupported for the QR form.
func Unwrap(uri string) (string, error) {
	s := strings.TrimSpace(uri)
	switch {
	case s == "":
		return "", fmt.Errorf("setupuri: empty Setup URI: %w", engine.ErrMalformed)
	case strings.HasPrefix(s, PrefixQR):
		return "", fmt.Errorf("setupuri: the QR-code form of a Setup URI is not supported; copy the Setup URI itself: %w", engine.ErrUnsupported)
	case strings.HasPrefix(s, Prefix):
		s = s[len(Prefix):]
		if i := strings.IndexAny(s, "&#"); i >= 0 {
			s = s[:i]
		}
		if strings.HasPrefix(s, e2ee.PrefixHKDFSalted) {
			return s, nil // not encoded (typed by hand): "%$" is no escape
		}
	case strings.HasPrefix(s, "%25"), strings.HasPrefix(s, "%5B"), strings.HasPrefix(s, "%5b"):
	case strings.Contains(s, "://"):
		return "", fmt.Errorf("setupuri: not a Setup URI (it must start with %s): %w", Prefix, engine.ErrMalformed)
	default:
		return s, nil
	}
	dec, err := url.PathUnescape(s)
	if err != nil {
		return "", fmt.Errorf("setupuri: bad %%-escape in the Setup URI: %w", engine.ErrMalformed)
	}
	if dec == "" {
		return "", fmt.Errorf("setupuri: the Setup URI holds no settings: %w", engine.ErrMalformed)
	}
	return dec, nil
}

// FromJSON reads a settings object in clear (the plugin's data.json, or
// a decrypted Setup URI). Absent keys take upstream's DEFAULT_SETTINGS
// values; unknown keys are kept in Raw; a known key of the wrong JSON
// type wraps engine.ErrMalformed, a format setting the engine does not
// know wraps engine.ErrUnsupported. An empty E2EE passphrase is not an
// error here (see Validate).
func FromJSON(data []byte) (*Config, error) {
	var tv negotiate.TweakValues
	t := strings.TrimSpace(string(data))
	if !strings.HasPrefix(t, "{") || !json.Valid(data) || tv.UnmarshalJSON(data) != nil {
		return nil, fmt.Errorf("setupuri: the settings are not a JSON object: %w", engine.ErrMalformed)
	}
	r := reader{tv: tv}
	c := &Config{Raw: append(json.RawMessage(nil), data...)}
	var rt string
	r.str("remoteType", &rt)
	c.RemoteType = RemoteType(rt)
	r.str("couchDB_URI", &c.CouchDB.URI)
	r.str("couchDB_USER", &c.CouchDB.User)
	r.str("couchDB_PASSWORD", &c.CouchDB.Password)
	r.str("couchDB_DBNAME", &c.CouchDB.Database)
	r.str("couchDB_CustomHeaders", &c.CouchDB.CustomHeaders)
	r.boolean("useJWT", &c.CouchDB.UseJWT)
	r.boolean("useRequestAPI", &c.CouchDB.UseRequestAPI)
	c.S3.Region = "auto"
	c.S3.ForcePathStyle = true
	r.str("endpoint", &c.S3.Endpoint)
	r.str("accessKey", &c.S3.AccessKey)
	r.str("secretKey", &c.S3.SecretKey)
	r.str("bucket", &c.S3.Bucket)
	r.str("bucketPrefix", &c.S3.Prefix)
	r.str("region", &c.S3.Region)
	r.boolean("forcePathStyle", &c.S3.ForcePathStyle)
	r.boolean("useCustomRequestHandler", &c.S3.UseCustomRequestHandler)
	r.str("bucketCustomHeaders", &c.S3.CustomHeaders)
	c.Chunks = Chunks{ReadOnline: true, Concurrency: 40, MinimumIntervalMS: 50}
	r.boolean("readChunksOnline", &c.Chunks.ReadOnline)
	r.boolean("useOnlyLocalChunk", &c.Chunks.OnlyLocal)
	r.integer("concurrencyOfReadChunksOnline", &c.Chunks.Concurrency)
	r.integer("minimumIntervalOfReadChunksOnline", &c.Chunks.MinimumIntervalMS)
	r.str("deviceAndVaultName", &c.DeviceName)
	r.str("additionalSuffixOfDatabaseName", &c.DatabaseSuffix)
	var pass string
	r.str("passphrase", &pass)
	if r.err != nil {
		return nil, r.err
	}
	// A placeholder passphrase lets FromTweakValues check everything but
	// the passphrase's presence, which the caller may supply later.
	v, err := livesync.FromTweakValues(livesync.Settings{Passphrase: "-"}, tv)
	if err != nil {
		return nil, fmt.Errorf("setupuri: vault settings: %w", err)
	}
	v.Passphrase = pass
	if v.MinimumChunkSize == 0 {
		v.MinimumChunkSize = 20 // upstream's default; 0 means the same
	}
	if v.HashAlg == "" {
		v.HashAlg = livesync.HashXXHash64 // spelled out, as the other two
	}
	c.Vault = v
	return c, nil
}

// reader reads typed values from a settings object, remembering the first
// error. Absent keys and null leave the destination unchanged.
type reader struct {
	tv  negotiate.TweakValues
	err error
}

func (r *reader) get(key string, dst any) {
	raw, ok := r.tv.Get(key)
	if !ok || r.err != nil || string(raw) == "null" {
		return
	}
	if json.Unmarshal(raw, dst) != nil {
		r.err = fmt.Errorf("setupuri: setting %q has the wrong type: %w", key, engine.ErrMalformed)
	}
}

func (r *reader) str(key string, dst *string)   { r.get(key, dst) }
func (r *reader) boolean(key string, dst *bool) { r.get(key, dst) }
func (r *reader) integer(key string, dst *int) {
	f := math.NaN()
	r.get(key, &f)
	if math.IsNaN(f) || r.err != nil {
		return
	}
	if f < math.MinInt32 || f > math.MaxInt32 {
		r.err = fmt.Errorf("setupuri: setting %q is out of range: %w", key, engine.ErrMalformed)
		return
	}
	*dst = int(f)
}

// vaultKeys are the settings object's keys that Config.Vault models,
// besides passphrase.
var vaultKeys = []string{
	"handleFilenameCaseSensitive", "encrypt", "usePathObfuscation",
	"useDynamicIterationCount", "enableCompression", "customChunkSize",
	"minimumChunkSize", "E2EEAlgorithm", "chunkSplitterVersion", "hashAlg",
}

// erasedKeys are blanked in every Setup URI, as upstream's
// encodeSettingsToSetupURI does: they only make sense on one device.
var erasedKeys = []string{"configPassphraseStore", "encryptedCouchDBConnection", "encryptedPassphrase"}

// ToJSON returns the settings object of c: Raw (or an empty object) with
// every key Config models set from its fields, in upstream's spelling.
func (c *Config) ToJSON() ([]byte, error) {
	var tv negotiate.TweakValues
	if len(c.Raw) > 0 {
		if err := tv.UnmarshalJSON(c.Raw); err != nil {
			return nil, fmt.Errorf("setupuri: Config.Raw is not a JSON object: %w", engine.ErrMalformed)
		}
	}
	set := func(k string, v any) { _ = tv.Set(k, v) } // plain values always encode
	set("remoteType", string(c.RemoteType))
	set("couchDB_URI", c.CouchDB.URI)
	set("couchDB_USER", c.CouchDB.User)
	set("couchDB_PASSWORD", c.CouchDB.Password)
	set("couchDB_DBNAME", c.CouchDB.Database)
	set("couchDB_CustomHeaders", c.CouchDB.CustomHeaders)
	set("useJWT", c.CouchDB.UseJWT)
	set("useRequestAPI", c.CouchDB.UseRequestAPI)
	set("endpoint", c.S3.Endpoint)
	set("accessKey", c.S3.AccessKey)
	set("secretKey", c.S3.SecretKey)
	set("bucket", c.S3.Bucket)
	set("bucketPrefix", c.S3.Prefix)
	set("region", c.S3.Region)
	set("forcePathStyle", c.S3.ForcePathStyle)
	set("useCustomRequestHandler", c.S3.UseCustomRequestHandler)
	set("bucketCustomHeaders", c.S3.CustomHeaders)
	set("readChunksOnline", c.Chunks.ReadOnline)
	set("useOnlyLocalChunk", c.Chunks.OnlyLocal)
	set("concurrencyOfReadChunksOnline", c.Chunks.Concurrency)
	set("minimumIntervalOfReadChunksOnline", c.Chunks.MinimumIntervalMS)
	set("deviceAndVaultName", c.DeviceName)
	set("additionalSuffixOfDatabaseName", c.DatabaseSuffix)
	set("passphrase", c.Vault.Passphrase)
	vt := c.Vault.TweakValues()
	for _, k := range vaultKeys {
		if raw, ok := vt.Get(k); ok {
			_ = tv.SetRaw(k, raw)
		}
	}
	return tv.MarshalJSON()
}

// Encode returns the Setup URI of c for setupPassphrase, as upstream's
// encodeSettingsToSetupURI makes it (without its trailing space): the
// settings object of ToJSON with the device-local keys blanked, encrypted
// in the "%$" form (e2ee.EncryptSetupString, r as there) and URI-encoded
// as encodeURIComponent does. It costs one PBKDF2 derivation.
func Encode(c *Config, setupPassphrase string, r io.Reader) (string, error) {
	js, err := c.ToJSON()
	if err != nil {
		return "", err
	}
	var tv negotiate.TweakValues
	if err := tv.UnmarshalJSON(js); err != nil {
		return "", fmt.Errorf("setupuri: settings: %w", engine.ErrMalformed)
	}
	for _, k := range erasedKeys {
		_ = tv.Set(k, "")
	}
	if js, err = tv.MarshalJSON(); err != nil {
		return "", err
	}
	enc, err := e2ee.EncryptSetupString(string(js), setupPassphrase, r)
	if err != nil {
		return "", fmt.Errorf("setupuri: encrypting the settings: %w", err)
	}
	return Prefix + encodeURIComponent(enc), nil
}

// encodeURIComponent escapes s as JavaScript's encodeURIComponent does:
// everything but A–Z a–z 0–9 and -_.!~*'() becomes %XX of its UTF-8 bytes.
func encodeURIComponent(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s) * 3 / 2)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || strings.IndexByte("-_.!~*'()", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// String describes c without secrets.
func (c Config) String() string {
	return fmt.Sprintf("setupuri.Config{RemoteType:%q CouchDB:%v S3:%v Encrypt:%t PathObfuscation:%t}",
		string(c.RemoteType), c.CouchDB, c.S3, c.Vault.Encrypt, c.Vault.PathObfuscation)
}

// GoString is String, so that %#v redacts secrets too.
func (c Config) GoString() string { return c.String() }

// String describes c with the password redacted.
func (c CouchDB) String() string {
	return fmt.Sprintf("{URI:%q User:%q Password:%s Database:%q}", c.URI, c.User, redact(c.Password), c.Database)
}

// GoString is String.
func (c CouchDB) GoString() string { return c.String() }

// String describes s with the secret key redacted.
func (s S3) String() string {
	return fmt.Sprintf("{Endpoint:%q Bucket:%q Prefix:%q Region:%q AccessKey:%q SecretKey:%s ForcePathStyle:%t}",
		s.Endpoint, s.Bucket, s.Prefix, s.Region, s.AccessKey, redact(s.SecretKey), s.ForcePathStyle)
}

// GoString is String.
func (s S3) GoString() string { return s.String() }

func redact(s string) string {
	if s == "" {
		return `""`
	}
	return "[redacted]"
}
