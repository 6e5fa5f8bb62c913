package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/livesync-go/livesync-go/adapters/minio"
	"github.com/livesync-go/livesync-go/engine"
)

// Bucket errors a setting can fix name the relay's configuration keys,
// never the adapter's Go fields.
func TestS3ErrorsNameTheRelaysKeys(t *testing.T) {
	spec := upstreamSpec{kind: kindS3}
	auth := func(se *minio.SettingError) error {
		return &engine.Error{Op: "read object", Stage: engine.StageAuth, Err: fmt.Errorf("minio: refused: %w", se)}
	}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"access key", auth(&minio.SettingError{Setting: minio.SettingAccessKey, Problem: "unknown access key"}), "authentication failed: check access_key: "},
		{"secret key", auth(&minio.SettingError{Setting: minio.SettingSecretKey, Problem: "bad signature"}), "check the secret key (secret_key_file or secret_key_env)"},
		{"region", auth(&minio.SettingError{Setting: minio.SettingRegion, Want: "eu-west-3", Problem: "wrong region"}), `set region = "eu-west-3"`},
		{"untrusted certificate", &engine.Error{Op: "list", Stage: engine.StageProtocol, Err: &minio.SettingError{Setting: minio.SettingCACert, Problem: "not trusted", Err: minio.ErrTLS}}, "; trust the server's certificate authority with ca_file"},
		{"other auth failure", &engine.Error{Op: "list", Stage: engine.StageAuth, Err: errors.New("minio: access denied")}, "authentication failed: check access_key, the secret key"},
	} {
		got := explainUpstreamErr(spec, tc.err)
		if !strings.Contains(got, tc.want) || strings.Contains(got, "Config.") {
			t.Errorf("%s: %q, want it to contain %q", tc.name, got, tc.want)
		}
	}
	// The configuration check, as resolveUpstreams runs it.
	err := withS3SettingKeys(minio.Config{Endpoint: "127.0.0.1:9000", Bucket: "v"}.Validate())
	if msg := err.Error(); !strings.Contains(msg, `bucket name "v"`) || !strings.HasSuffix(msg, "; check bucket") {
		t.Errorf("invalid bucket: %q", msg)
	}
}
