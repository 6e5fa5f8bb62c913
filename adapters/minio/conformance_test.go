package minio_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/adapters/minio"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/enginetest"
	"github.com/livesync-go/livesync-go/engine/journalsync/journalsynctest"
	minioclient "github.com/minio/minio-go/v7"
)

// envS3 is a path-style Config for the S3 server the environment names
// (versitygw in CI: .ci/run starts tests/s3server), without a bucket.
// Without one it fails under CI and skips otherwise.
func envS3(t *testing.T) minio.Config {
	t.Helper()
	cfg := minio.Config{Endpoint: os.Getenv("LIVESYNC_TEST_S3_ENDPOINT"), AccessKey: os.Getenv("LIVESYNC_TEST_S3_ACCESS_KEY"),
		SecretKey: os.Getenv("LIVESYNC_TEST_S3_SECRET_KEY"), Region: os.Getenv("LIVESYNC_TEST_S3_REGION"), PathStyle: true}
	if cfg.Endpoint == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("LIVESYNC_TEST_S3_ENDPOINT is not set but CI is: the S3 conformance tests must run in CI " +
				"(.ci/run starts tests/s3server and sets LIVESYNC_TEST_S3_ENDPOINT, _ACCESS_KEY and _SECRET_KEY)")
		}
		t.Skip("LIVESYNC_TEST_S3_ENDPOINT not set; run tests/run.sh, or see README.md \"Integration tests\"")
	}
	switch v := os.Getenv("LIVESYNC_TEST_S3_SECURE"); {
	case v == "1" || v == "true" || strings.HasPrefix(cfg.Endpoint, "https://"):
		cfg.Secure = true
	}
	if strings.HasPrefix(cfg.Endpoint, "http://") {
		cfg.Secure = false
	}
	if f := os.Getenv("LIVESYNC_TEST_S3_CA_FILE"); f != "" {
		pem, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("LIVESYNC_TEST_S3_CA_FILE: %v", err)
		}
		cfg.CACertPEM = pem
	}
	return cfg
}

// freshBucket creates a bucket with a random name on the server env
// names; objects go under prefix. The cleanup removes the bucket and its
// objects.
func freshBucket(t *testing.T, env minio.Config, prefix string) (*minio.Bucket, func()) {
	t.Helper()
	r := make([]byte, 6)
	_, _ = rand.Read(r)
	bp := os.Getenv("LIVESYNC_TEST_S3_BUCKET_PREFIX")
	if bp == "" {
		bp = "lsgo-test-"
	}
	env.Bucket, env.Prefix = bp+"suite-"+hex.EncodeToString(r), prefix
	b, err := minio.New(env)
	if err != nil {
		t.Fatal(err)
	}
	c := b.Client()
	if err := c.MakeBucket(t.Context(), env.Bucket, minioclient.MakeBucketOptions{Region: env.Region}); err != nil {
		t.Fatalf("make bucket %s: %v", env.Bucket, err)
	}
	return b, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		objs := c.ListObjects(ctx, env.Bucket, minioclient.ListObjectsOptions{Recursive: true})
		for re := range c.RemoveObjects(ctx, env.Bucket, objs, minioclient.RemoveObjectsOptions{}) {
			t.Logf("remove %s: %v", re.ObjectName, re.Err)
		}
		if err := c.RemoveBucket(ctx, env.Bucket); err != nil {
			t.Logf("remove bucket %s: %v", env.Bucket, err)
		}
	}
}

// remover deletes objects of b with the S3 client, behind the port's
// back, as another device pruning the journal would.
func remover(t *testing.T, b *minio.Bucket) func(key string) {
	return func(key string) {
		if err := b.Client().RemoveObject(t.Context(), b.Name(), key, minioclient.RemoveObjectOptions{}); err != nil {
			t.Errorf("remove %s: %v", key, err)
		}
	}
}

func TestObjectsSuite(t *testing.T) {
	env := envS3(t)
	suite := func(prefix string) func(t *testing.T) (enginetest.Objects, func(string), func()) {
		return func(t *testing.T) (enginetest.Objects, func(string), func()) {
			b, cleanup := freshBucket(t, env, prefix)
			return b, remover(t, b), cleanup
		}
	}
	enginetest.ObjectsSuite(t, suite("vault/"))
	t.Run("NoPrefix", func(t *testing.T) { enginetest.ObjectsSuite(t, suite("")) })
}

// TestJournalPackGoneAfterListing: a pack deleted from the S3 bucket
// after a journal listed it (NoSuchKey) is skipped by Receive and
// answered Missing by the pack index, not taken for a missing bucket.
func TestJournalPackGoneAfterListing(t *testing.T) {
	b, cleanup := freshBucket(t, envS3(t), "vault/")
	t.Cleanup(cleanup)
	journalsynctest.PackGoneAfterListing(t, b, remover(t, b))
}

// TestChunkSourceSuitePackIndex runs the chunk source suite over the
// journal's pack index on the S3 server: chunks sent as packs by one
// device, fetched by id by another that received nothing.
func TestChunkSourceSuitePackIndex(t *testing.T) {
	env := envS3(t)
	enginetest.ChunkSourceSuite(t,
		func(t *testing.T, chunks []engine.Chunk) (engine.ChunkSource, func()) {
			b, cleanup := freshBucket(t, env, "vault/")
			return journalsynctest.PackIndexSource(t, b, chunks), cleanup
		},
		func(t *testing.T) (engine.ChunkSource, func()) { // the secret key is wrong
			b, cleanup := freshBucket(t, env, "vault/")
			wrong := env
			wrong.Bucket, wrong.Prefix, wrong.SecretKey = b.Name(), "vault/", env.SecretKey+"x"
			wrong.Retry.Delay = func(int) time.Duration { return time.Millisecond }
			wb, err := minio.New(wrong)
			if err != nil {
				cleanup()
				t.Fatal(err)
			}
			return journalsynctest.PackIndexSource(t, wb, nil), cleanup
		})
}
