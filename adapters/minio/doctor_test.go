package minio_test

import (
	"testing"

	"github.com/livesync-go/livesync-go/adapters/minio"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/negotiate/doctor"
	"github.com/livesync-go/livesync-go/engine/vault"
)

func TestDoctor(t *testing.T) {
	env := envS3(t)
	b, cleanup := freshBucket(t, env, "vault/")
	t.Cleanup(cleanup)
	o := doctor.Options{NewVault: negotiate.NewVaultTweaks(), Codes: doctor.Codes{Failed: 13, Unreachable: 14, Auth: 15, Passphrase: 16, Refused: 17}}
	got, complete := b.Doctor(t.Context(), o)
	checks := []string{"server", "credentials", "bucket", "packs", "salt", "milestone", "passphrase"}
	if !complete || len(got) != len(checks) {
		t.Fatalf("a new bucket: complete %v, %+v", complete, got)
	}
	for i, c := range checks {
		if got[i].Check != c || got[i].Status != vault.FindingOK {
			t.Errorf("finding %d: %+v, want %s ok", i, got[i], c)
		}
	}

	// After a handshake the salt is there, and the milestone accepts a
	// new device.
	if _, _, err := b.Handshake(t.Context(), minio.HandshakeOptions{NodeID: "n", Settings: negotiate.NewVaultTweaks()}); err != nil {
		t.Fatal(err)
	}
	got, complete = b.Doctor(t.Context(), o)
	if !complete || got[4].Check != "salt" || got[4].Status != vault.FindingOK || got[5].Status != vault.FindingOK {
		t.Fatalf("after a handshake: %+v", got)
	}

	env.Bucket = "lsgo-test-missing-bucket"
	missing, err := minio.New(env)
	if err != nil {
		t.Fatal(err)
	}
	got, complete = missing.Doctor(t.Context(), o)
	last := got[len(got)-1]
	if complete || last.Check != "bucket" || last.Status != vault.FindingProblem || last.Code != 17 {
		t.Fatalf("a missing bucket: complete %v, %+v", complete, got)
	}
}
