package setupuri

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
)

// upstreamCouch is a settings object as the plugin writes it for a
// self-hosted CouchDB vault with E2EE (keys of commonlib
// src/common/models/setting.type.ts), with keys this package ignores.
const upstreamCouch = `{"remoteType":"","useCustomRequestHandler":false,
"couchDB_URI":"https://couch.example.org","couchDB_USER":"alice","couchDB_PASSWORD":"s3cr3t-pw",
"couchDB_DBNAME":"notes","liveSync":true,"syncOnSave":false,"minimumChunkSize":20,
"encrypt":true,"passphrase":"vault-pass-phrase","usePathObfuscation":true,
"customChunkSize":60,"readChunksOnline":true,"hashAlg":"xxhash64","E2EEAlgorithm":"v2",
"chunkSplitterVersion":"v3-rabin-karp","handleFilenameCaseSensitive":false,
"concurrencyOfReadChunksOnline":30,"minimumIntervalOfReadChunksOnline":25,
"enableCompression":false,"useDynamicIterationCount":false,"deviceAndVaultName":"",
"pluginSyncExtendedSetting":{"x":{"key":"x","mode":0,"files":[]}},
"configPassphraseStore":"","encryptedPassphrase":"","encryptedCouchDBConnection":"",
"someFutureKey":[1,2,{"a":null}]}`

const upstreamS3 = `{"remoteType":"MINIO","endpoint":"https://s3.example.org","accessKey":"AKIA1",
"secretKey":"very-secret-key","bucket":"vaults","bucketPrefix":"my-vault/","region":"eu-1",
"forcePathStyle":false,"useCustomRequestHandler":true,"encrypt":false,"passphrase":"",
"customChunkSize":10,"E2EEAlgorithm":"","hashAlg":"","chunkSplitterVersion":"v2"}`

func TestFromJSONCouchDB(t *testing.T) {
	c, err := FromJSON([]byte(upstreamCouch))
	if err != nil {
		t.Fatal(err)
	}
	if c.RemoteType != RemoteCouchDB {
		t.Errorf("RemoteType = %q", c.RemoteType)
	}
	want := CouchDB{URI: "https://couch.example.org", User: "alice", Password: "s3cr3t-pw", Database: "notes"}
	if c.CouchDB != want {
		t.Errorf("CouchDB = %#v", c.CouchDB)
	}
	wantV := livesync.Settings{Encrypt: true, Passphrase: "vault-pass-phrase", PathObfuscation: true,
		E2EEAlgorithm: livesync.E2EEV2, Splitter: livesync.SplitterV3, CustomChunkSize: 60,
		MinimumChunkSize: 20, HashAlg: livesync.HashXXHash64}
	if c.Vault != wantV {
		t.Errorf("Vault = %+v", c.Vault)
	}
	if c.Chunks != (Chunks{ReadOnline: true, Concurrency: 30, MinimumIntervalMS: 25}) {
		t.Errorf("Chunks = %+v", c.Chunks)
	}
	if !bytes.Contains(c.Raw, []byte(`"someFutureKey"`)) {
		t.Error("Raw lost an unknown key")
	}
	if err := c.Validate(); err != nil {
		t.Error(err)
	}
}

func TestFromJSONS3AndUpstreamSpellings(t *testing.T) {
	c, err := FromJSON([]byte(upstreamS3))
	if err != nil {
		t.Fatal(err)
	}
	if c.RemoteType != RemoteS3 {
		t.Errorf("RemoteType = %q", c.RemoteType)
	}
	want := S3{Endpoint: "https://s3.example.org", AccessKey: "AKIA1", SecretKey: "very-secret-key",
		Bucket: "vaults", Prefix: "my-vault/", Region: "eu-1", UseCustomRequestHandler: true}
	if c.S3 != want {
		t.Errorf("S3 = %#v", c.S3)
	}
	// Upstream's empty-string spellings: V1 E2EE, legacy hash.
	if c.Vault.E2EEAlgorithm != livesync.E2EEV1 || c.Vault.HashAlg != livesync.HashLegacy ||
		c.Vault.Splitter != livesync.SplitterV2 || c.Vault.CustomChunkSize != 10 {
		t.Errorf("Vault = %+v", c.Vault)
	}
}

func TestFromJSONDefaults(t *testing.T) {
	c, err := FromJSON([]byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.S3.Region != "auto" || !c.S3.ForcePathStyle {
		t.Errorf("S3 defaults = %+v", c.S3)
	}
	if c.Chunks != (Chunks{ReadOnline: true, Concurrency: 40, MinimumIntervalMS: 50}) {
		t.Errorf("Chunks defaults = %+v", c.Chunks)
	}
	if c.Vault.E2EEAlgorithm != livesync.E2EEV2 || c.Vault.Splitter != livesync.SplitterV3 {
		t.Errorf("Vault defaults = %+v", c.Vault)
	}
	// null means "absent".
	if c, err = FromJSON([]byte(`{"region":null,"forcePathStyle":null}`)); err != nil || c.S3.Region != "auto" || !c.S3.ForcePathStyle {
		t.Errorf("null: %v %+v", err, c)
	}
}

func TestFromJSONErrors(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want error
	}{
		{``, engine.ErrMalformed},
		{`null`, engine.ErrMalformed},
		{`[1]`, engine.ErrMalformed},
		{`{"a":1}x`, engine.ErrMalformed},
		{`{"couchDB_PASSWORD":12}`, engine.ErrMalformed},
		{`{"encrypt":"yes"}`, engine.ErrMalformed},
		{`{"concurrencyOfReadChunksOnline":1e20}`, engine.ErrMalformed},
		{`{"hashAlg":"md5"}`, engine.ErrUnsupported},
		{`{"customChunkSize":-1}`, engine.ErrUnsupported},
	} {
		_, err := FromJSON([]byte(tc.in))
		if !errors.Is(err, tc.want) {
			t.Errorf("FromJSON(%s) = %v, want %v", tc.in, err, tc.want)
		}
	}
	// An empty E2EE passphrase is left to the caller.
	c, err := FromJSON([]byte(`{"encrypt":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(c.Validate(), engine.ErrUnsupported) {
		t.Errorf("Validate = %v", c.Validate())
	}
}

func TestEncodeParseRoundTrip(t *testing.T) {
	for _, in := range []string{upstreamCouch, upstreamS3} {
		c, err := FromJSON([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		uri, err := Encode(c, "setup pass ✓", nil)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(uri, Prefix+"%25%24") {
			t.Fatalf("uri = %.60s…", uri)
		}
		for _, form := range []string{uri, " " + uri + " \n", uri[len(Prefix):], uri + "&x=1"} {
			got, err := Parse(form, "setup pass ✓")
			if err != nil {
				t.Fatal(err)
			}
			if got.RemoteType != c.RemoteType || got.CouchDB != c.CouchDB || got.S3 != c.S3 ||
				got.Vault != c.Vault || got.Chunks != c.Chunks {
				t.Errorf("round trip: got %+v, want %+v", got, c)
			}
			var m map[string]any
			if err := json.Unmarshal(got.Raw, &m); err != nil {
				t.Fatal(err)
			}
			if m["encryptedPassphrase"] != "" {
				t.Error("encryptedPassphrase not blanked")
			}
		}
	}
}

func TestParseBareUnencoded(t *testing.T) {
	c, _ := FromJSON([]byte(upstreamS3))
	uri, err := Encode(c, "p", nil)
	if err != nil {
		t.Fatal(err)
	}
	bare, err := Unwrap(uri)
	if err != nil || !strings.HasPrefix(bare, "%$") {
		t.Fatalf("Unwrap: %v", err)
	}
	for _, s := range []string{bare, Prefix + bare} {
		got, err := Parse(s, "p")
		if err != nil || got.S3 != c.S3 {
			t.Errorf("Parse(%.10s…) = %v", s, err)
		}
	}
}

func TestParseWrongPassphrase(t *testing.T) {
	c, _ := FromJSON([]byte(upstreamCouch))
	uri, err := Encode(c, "right-Xq7", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Parse(uri, "wrong-Zk9")
	if !errors.Is(err, engine.ErrDecrypt) {
		t.Fatalf("err = %v, want ErrDecrypt", err)
	}
	for _, secret := range []string{"right-Xq7", "wrong-Zk9", "s3cr3t-pw", "vault-pass-phrase"} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error %q contains a secret", err)
		}
	}
	// Altered ciphertext is a decryption failure too, not a panic.
	bare, _ := Unwrap(uri)
	alt := bare[:len(bare)-6] + "AAAAAA"
	if _, err := Parse(alt, "right-Xq7"); !errors.Is(err, engine.ErrDecrypt) && !errors.Is(err, engine.ErrMalformed) {
		t.Errorf("altered: %v", err)
	}
}

func TestUnwrapErrors(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want error
	}{
		{"", engine.ErrMalformed},
		{"   ", engine.ErrMalformed},
		{PrefixQR + "abc", engine.ErrUnsupported},
		{Prefix + "%zz", engine.ErrMalformed},
		{Prefix, engine.ErrMalformed},
		{"https://example.org/?settings=x", engine.ErrMalformed},
		{"%25zz%", engine.ErrMalformed},
	} {
		if _, err := Unwrap(tc.in); !errors.Is(err, tc.want) {
			t.Errorf("Unwrap(%q) = %v, want %v", tc.in, err, tc.want)
		}
	}
	// decodeURIComponent keeps '+'.
	if s, err := Unwrap(Prefix + "%25%24a+b%2B"); err != nil || s != "%$a+b+" {
		t.Errorf("Unwrap plus = %q, %v", s, err)
	}
	// The legacy JSON-array form, URI-encoded.
	if s, err := Unwrap("%5B%22x%22%5D"); err != nil || s != `["x"]` {
		t.Errorf("Unwrap legacy = %q, %v", s, err)
	}
}

func TestEncodeURIComponent(t *testing.T) {
	in := "%$AZaz09-_.!~*'()+/= é&"
	want := "%25%24AZaz09-_.!~*'()%2B%2F%3D%20%C3%A9%26"
	if got := encodeURIComponent(in); got != want {
		t.Errorf("got %s want %s", got, want)
	}
}

func TestStringRedactsSecrets(t *testing.T) {
	for _, in := range []string{upstreamCouch, upstreamS3} {
		c, _ := FromJSON([]byte(in))
		for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%+v", *c), fmt.Sprintf("%#v", c), fmt.Sprintf("%v", c.CouchDB), fmt.Sprintf("%v", c.S3)} {
			for _, secret := range []string{"s3cr3t-pw", "vault-pass-phrase", "very-secret-key"} {
				if strings.Contains(s, secret) {
					t.Errorf("%s contains a secret", s)
				}
			}
		}
	}
}

// TestUpstreamVectors parses Setup URIs made by the real octagonal-wheels
// as the plugin makes them (testdata/genvectors.mjs), trailing space
// included, and checks every modelled key against the settings object.
func TestUpstreamVectors(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "upstream.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		SetupPassphrase string `json:"setupPassphrase"`
		Vectors         []struct {
			Name     string          `json:"name"`
			Settings json.RawMessage `json:"settings"`
			URI      string          `json:"uri"`
		} `json:"vectors"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Vectors) < 3 {
		t.Fatalf("%d vectors", len(f.Vectors))
	}
	for _, v := range f.Vectors {
		got, err := Parse(v.URI, f.SetupPassphrase)
		if err != nil {
			t.Errorf("%s: %v", v.Name, err)
			continue
		}
		want, err := FromJSON(v.Settings)
		if err != nil {
			t.Fatal(err)
		}
		if got.RemoteType != want.RemoteType || got.CouchDB != want.CouchDB || got.S3 != want.S3 ||
			got.Vault != want.Vault || got.Chunks != want.Chunks || !jsonEqual(t, got.Raw, v.Settings) {
			t.Errorf("%s: got %+v, want %+v", v.Name, got, want)
		}
		if err := got.Validate(); err != nil {
			t.Errorf("%s: %v", v.Name, err)
		}
		if _, err := Parse(v.URI, f.SetupPassphrase+"x"); !errors.Is(err, engine.ErrDecrypt) {
			t.Errorf("%s: wrong passphrase gave %v", v.Name, err)
		}
	}
	couch, _ := Parse(f.Vectors[0].URI, f.SetupPassphrase)
	if couch.CouchDB.Password != "pw: ü+/=&?" || couch.Vault.Passphrase != "vault passphrase ✓" || !couch.Vault.PathObfuscation {
		t.Errorf("couchdb vector: %+v", couch)
	}
	s3, _ := Parse(f.Vectors[1].URI, f.SetupPassphrase)
	if s3.RemoteType != RemoteS3 || s3.S3.Prefix != "vault1/" || s3.S3.SecretKey != "minio secret" || s3.Vault.CustomChunkSize != 10 {
		t.Errorf("s3 vector: %+v", s3)
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
