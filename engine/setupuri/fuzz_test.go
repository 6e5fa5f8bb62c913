package setupuri

import (
	"errors"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/engine"
)

// fakeDecrypt stands in for the setup-string decryption so that fuzzing
// is not bound by PBKDF2: "%$" + JSON decrypts to the JSON.
func fakeDecrypt(s, pass string) (string, error) {
	if !strings.HasPrefix(s, "%$") {
		return "", engine.ErrDecrypt
	}
	return s[2:], nil
}

// FuzzParse checks that no input panics and that every error wraps one of
// the engine's sentinels and never repeats the passphrase.
func FuzzParse(f *testing.F) {
	f.Add(Prefix+encodeURIComponent("%$"+upstreamCouch), "pw")
	f.Add("%$"+upstreamS3, "pw")
	f.Add(Prefix+"%zz", "pw")
	f.Add(PrefixQR+"x", "pw")
	f.Add(`%$[1]`, "pw")
	f.Add(`%$null`, "pw")
	f.Add(`%${"concurrencyOfReadChunksOnline":1e300}`, "pw")
	f.Add(`%5B%22x%22%5D`, "pw")
	f.Fuzz(func(t *testing.T, uri, pass string) {
		c, err := parse(uri, "zz-"+pass, fakeDecrypt)
		if err != nil {
			if !errors.Is(err, engine.ErrMalformed) && !errors.Is(err, engine.ErrDecrypt) && !errors.Is(err, engine.ErrUnsupported) {
				t.Fatalf("unclassified error %v", err)
			}
			if strings.Contains(err.Error(), "zz-"+pass) {
				t.Fatal("error repeats the passphrase")
			}
			return
		}
		js, err := c.ToJSON()
		if err != nil {
			t.Fatalf("ToJSON of a parsed Config: %v", err)
		}
		c2, err := FromJSON(js)
		if err != nil {
			t.Fatalf("FromJSON(ToJSON) = %v", err)
		}
		if c2.RemoteType != c.RemoteType || c2.CouchDB != c.CouchDB || c2.S3 != c.S3 || c2.Vault != c.Vault || c2.Chunks != c.Chunks {
			t.Fatalf("ToJSON/FromJSON changed the Config")
		}
	})
}
