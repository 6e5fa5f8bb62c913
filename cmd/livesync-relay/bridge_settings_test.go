package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi"
	"github.com/livesync-go/livesync-go/adapters/minio"
	"github.com/livesync-go/livesync-go/engine"
	ebridge "github.com/livesync-go/livesync-go/engine/bridge"
	"github.com/livesync-go/livesync-go/engine/negotiate"
)

// "the bucket's throttle key runs bucket and prefix together
// (…,vaultcv/,…)": "the throttle key separates endpoint, bucket and
// prefix".
func TestBucketThrottleKey(t *testing.T) {
	for _, c := range []struct {
		cfg  minio.Config
		want string
	}{
		{minio.Config{Endpoint: "127.0.0.1:9000", Bucket: "vault", Prefix: "cv/"}, "http://127.0.0.1:9000,vault,cv/"},
		{minio.Config{Endpoint: "s3.example.com", Secure: true, Bucket: "vault"}, "https://s3.example.com,vault,"},
		{minio.Config{Endpoint: "https://s3.example.com/", Bucket: "b", Prefix: "p/q/"}, "https://s3.example.com,b,p/q/"},
	} {
		if got := bucketThrottleKey(upstreamSpec{kind: kindS3, s3: c.cfg}); got != c.want {
			t.Errorf("bucketThrottleKey(%+v) = %q, want %q", c.cfg, got, c.want)
		}
	}
}

// "upstream errors name the upstream, the database or bucket, and the
// fix": a missing database showed only
// "no_db_file: engine: not found".
func TestExplainMissingUpstreamDatabase(t *testing.T) {
	couch := upstreamSpec{name: "b", kind: kindCouchDB, couch: couchdb.Config{URL: "http://couch.example:5984/", Database: "vault-b"}}
	noDB := &engine.Error{Op: "changes", Stage: engine.StageProtocol, Err: fmt.Errorf("no_db_file: %w", engine.ErrNotFound)}
	check := func(msg string, wants ...string) {
		t.Helper()
		for _, w := range wants {
			if !strings.Contains(msg, w) {
				t.Errorf("%q lacks %q", msg, w)
			}
		}
	}
	check(explainUpstreamErr(couch, noDB), `database "vault-b"`, "http://couch.example:5984", "create it there", `upstream "b"`, "no_db_file")
	check(explainUpstreamErr(couch, &engine.Error{Op: "check database", Stage: engine.StageProtocol, Err: ebridge.ErrNoUpstreamDatabase}),
		`database "vault-b"`, "create it there")
	bucket := upstreamSpec{name: "c", kind: kindS3, s3: minio.Config{Endpoint: "s3.example:9000", Bucket: "vaults", Prefix: "cv/"}}
	noBucket := &engine.Error{Op: "read sync parameters", Stage: engine.StageStorage, Err: fmt.Errorf("%w: %w", minio.ErrNoBucket, engine.ErrNotFound)}
	check(explainUpstreamErr(bucket, noBucket), `bucket "vaults"`, "http://s3.example:9000", "create it there", `upstream "c"`)
}

// "The relay's own database always answers with the vault's real
// milestone", and encodes with it: a client writes the
// sync parameters before its milestone, so the codec built at the salt
// assumed E2EE with obfuscated paths until a restart. The milestone's
// PREFERRED now rebuilds it at once.
func TestMilestoneRebuildsTheVaultCodec(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "vault.passphrase"), []byte("codec settings passphrase\n"), 0o600)
	cfg := filepath.Join(dir, "relay.toml")
	os.WriteFile(cfg, []byte("[[databases]]\nname = \"vault\"\npassphrase_file = \"vault.passphrase\"\n"), 0o600)
	rn := startAdmin(t, filepath.Join(dir, "data"), "--config", cfg)
	salt, err := negotiate.NewSalt(nil)
	if err != nil {
		t.Fatal(err)
	}
	params, _ := json.Marshal(negotiate.NewSyncParameters(salt))
	rn.admin("PUT", "/vault/_local/obsidian_livesync_sync_parameters", string(params), 201)
	var v *couchapi.HeldDatabase
	for _, s := range rn.r.dbs.Opened() {
		if s.Name == "vault" {
			v = s
		}
	}
	if c, _ := v.Codec(); c == nil || !c.Settings().PathObfuscation {
		t.Fatalf("before the milestone: %+v", c)
	}
	now := time.Now()
	m := negotiate.NewMilestone("device", now)
	m.Register("device", negotiate.CouchDBChunkRange, negotiate.DeviceInfo{DeviceName: "device"},
		tweaksWith(t, "encrypt", true, "usePathObfuscation", false), now)
	raw, _ := json.Marshal(m)
	rn.admin("PUT", "/vault/_local/obsydian_livesync_milestone", string(raw), 201)
	if c, _ := v.Codec(); c == nil || c.Settings().PathObfuscation || !c.Settings().Encrypt {
		t.Fatal("after a milestone without path obfuscation, the codec still obfuscates paths (or does not encrypt)")
	}
}

func tweaksWith(t *testing.T, kv ...any) negotiate.TweakValues {
	t.Helper()
	tv := negotiate.NewVaultTweaks()
	for i := 0; i < len(kv); i += 2 {
		if err := tv.Set(kv[i].(string), kv[i+1]); err != nil {
			t.Fatal(err)
		}
	}
	return tv
}
