package soak

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	minioclient "github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/engine/livesync"
)

const passphrase = "soak test passphrase"

// settings are the vault's: end-to-end encrypted with obfuscated paths.
var settings = livesync.Settings{Passphrase: passphrase, Encrypt: true, PathObfuscation: true}

// servers are the test servers the environment names
// (tests/couchserver/start.sh, tests/s3server/start.sh).
type servers struct {
	couchURL, couchUser, couchPassword string
	s3Endpoint, s3Access, s3Secret     string
	s3Region, s3Prefix                 string
	s3Secure                           bool
}

// needServers reads the servers from the environment: without them the
// test fails under CI and skips otherwise.
func needServers(t *testing.T) servers {
	t.Helper()
	s := servers{
		couchURL: os.Getenv("LIVESYNC_TEST_COUCHDB_URL"), couchUser: os.Getenv("LIVESYNC_TEST_COUCHDB_USER"),
		couchPassword: os.Getenv("LIVESYNC_TEST_COUCHDB_PASSWORD"),
		s3Endpoint:    os.Getenv("LIVESYNC_TEST_S3_ENDPOINT"), s3Access: os.Getenv("LIVESYNC_TEST_S3_ACCESS_KEY"),
		s3Secret: os.Getenv("LIVESYNC_TEST_S3_SECRET_KEY"), s3Region: os.Getenv("LIVESYNC_TEST_S3_REGION"),
		s3Prefix: os.Getenv("LIVESYNC_TEST_S3_BUCKET_PREFIX"),
	}
	var missing []string
	if s.couchURL == "" {
		missing = append(missing, "LIVESYNC_TEST_COUCHDB_URL")
	}
	if s.s3Endpoint == "" {
		missing = append(missing, "LIVESYNC_TEST_S3_ENDPOINT")
	}
	if _, err := exec.LookPath("node"); err != nil {
		missing = append(missing, "node")
	}
	if _, err := os.Stat("../pouchdb/node_modules/pouchdb-node"); err != nil {
		missing = append(missing, "tests/pouchdb/node_modules (npm ci in tests/pouchdb)")
	}
	if len(missing) > 0 {
		msg := "the soak test needs " + strings.Join(missing, ", ") + " (tests/run.sh and .ci/run start the servers)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	if s.s3Prefix == "" {
		s.s3Prefix = "lsgo-test-"
	}
	s.s3Secure = os.Getenv("LIVESYNC_TEST_S3_SECURE") == "1" || strings.HasPrefix(s.s3Endpoint, "https://")
	s.s3Endpoint = strings.TrimPrefix(strings.TrimPrefix(s.s3Endpoint, "https://"), "http://")
	return s
}

func hexToken() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// buildBins builds the relay and the CLI into a temporary folder.
func buildBins(t *testing.T) (relay, cli string) {
	t.Helper()
	dir := t.TempDir()
	for _, pkg := range []string{"livesync-relay", "livesync"} {
		out, err := exec.Command("go", "build", "-o", filepath.Join(dir, pkg), "../../cmd/"+pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	return filepath.Join(dir, "livesync-relay"), filepath.Join(dir, "livesync")
}

// couchDB makes a database on the CouchDB-protocol test server, set up as
// a LiveSync vault (salt and milestone) by a first device, and removes it
// at the end.
func (s servers) couchDB(t *testing.T) *couchdb.DB {
	t.Helper()
	name := "lsgo-soak-" + hexToken()
	db, err := couchdb.New(couchdb.Config{URL: s.couchURL, Database: name, User: s.couchUser, Password: s.couchPassword})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := db.Create(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		db.Destroy(ctx)
		db.Close()
	})
	if _, _, err := db.Handshake(ctx, couchdb.HandshakeOptions{NodeID: "soak-setup", Settings: settings.TweakValues()}); err != nil {
		t.Fatal(err)
	}
	return db
}

// bucket makes an empty bucket on the S3 test server and removes it (and
// what is in it) at the end.
func (s servers) bucket(t *testing.T) string {
	t.Helper()
	c, err := minioclient.New(s.s3Endpoint, &minioclient.Options{Creds: credentials.NewStaticV4(s.s3Access, s.s3Secret, ""),
		Secure: s.s3Secure, Region: s.s3Region, Transport: s3Transport(t)})
	if err != nil {
		t.Fatal(err)
	}
	name := s.s3Prefix + "soak-" + hexToken()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.MakeBucket(ctx, name, minioclient.MakeBucketOptions{Region: s.s3Region}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		objs := c.ListObjects(ctx, name, minioclient.ListObjectsOptions{Recursive: true})
		for range c.RemoveObjects(ctx, name, objs, minioclient.RemoveObjectsOptions{}) {
		}
		c.RemoveBucket(ctx, name)
	})
	return name
}

// s3Transport trusts LIVESYNC_TEST_S3_CA_FILE when it is set.
func s3Transport(t *testing.T) http.RoundTripper {
	t.Helper()
	f := os.Getenv("LIVESYNC_TEST_S3_CA_FILE")
	if f == "" {
		return nil
	}
	tr, err := minioclient.DefaultTransport(true)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	if tr.TLSClientConfig.RootCAs == nil {
		t.Fatal("no system certificate pool")
	}
	tr.TLSClientConfig.RootCAs.AppendCertsFromPEM(pem)
	return tr
}

// relay is a running livesync-relay.
type relay struct {
	cmd      *exec.Cmd
	url      string // direct, for /status and /metrics
	password string // the admin's
	mu       sync.Mutex
	out      bytes.Buffer
	done     chan struct{}
}

func (r *relay) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.String()
}

// startRelay runs bin on a bbolt data folder with the database "vault"
// and the upstream tables ups (TOML); env carries their secrets.
func startRelay(t *testing.T, bin, ups string, env ...string) *relay {
	t.Helper()
	wd := t.TempDir()
	conf := fmt.Sprintf("data_dir = %q\n\n[[users]]\nname = \"admin\"\npassword_env = \"SOAK_ADMIN\"\nadmin = true\n\n"+
		"[purgatory]\npushed_delay = \"10s\"\n\n"+
		"[[databases]]\nname = \"vault\"\npassphrase_env = \"SOAK_PASSPHRASE\"\n\n%s", filepath.Join(wd, "data"), ups)
	if err := os.WriteFile(filepath.Join(wd, "relay.toml"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	r := &relay{password: hexToken(), done: make(chan struct{})}
	r.cmd = exec.Command(bin, "--config", filepath.Join(wd, "relay.toml"), "--listen", "127.0.0.1:0", "--log-level", "warn")
	r.cmd.Dir = wd
	r.cmd.Env = append([]string{"HOME=" + wd, "TMPDIR=" + os.TempDir(), "SOAK_ADMIN=" + r.password, "SOAK_PASSPHRASE=" + passphrase}, env...)
	// The relay's diagnostics pass through: a CPU or heap profile of the
	// soaked relay, written when it stops.
	for _, k := range []string{"LIVESYNC_RELAY_CPUPROFILE", "LIVESYNC_RELAY_MEMPROFILE"} {
		if v := os.Getenv(k); v != "" {
			r.cmd.Env = append(r.cmd.Env, k+"="+v)
		}
	}
	stderr, err := r.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	listening := make(chan string, 1)
	go func() {
		defer close(r.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		re := regexp.MustCompile(`listening on (http://\S+)`)
		for sc.Scan() {
			line := sc.Text()
			r.mu.Lock()
			if r.out.Len() < 4<<20 { // keep the start and the first warnings
				r.out.WriteString(line + "\n")
			}
			r.mu.Unlock()
			if m := re.FindStringSubmatch(line); m != nil {
				select {
				case listening <- m[1]:
				default:
				}
			}
		}
		io.Copy(io.Discard, stderr)
		r.cmd.Wait()
	}()
	t.Cleanup(func() { r.stop() })
	select {
	case r.url = <-listening:
	case <-r.done:
		t.Fatalf("the relay exited:\n%s", r.output())
	case <-time.After(60 * time.Second):
		t.Fatalf("the relay printed no URL:\n%s", r.output())
	}
	return r
}

// stop ends the relay with SIGTERM (a kill after 30 s).
func (r *relay) stop() {
	select {
	case <-r.done:
		return
	default:
	}
	r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		r.cmd.Process.Kill()
		<-r.done
	}
}

// get reads path as the admin.
func (r *relay) get(ctx context.Context, path string) ([]byte, error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", r.url+path, nil)
	req.SetBasicAuth("admin", r.password)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != 200 {
		err = fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return b, err
}

// status is the part of /status the soak reads.
type status struct {
	Databases []struct {
		Held []struct {
			Doc    string `json:"doc"`
			Reason string `json:"reason"`
			State  string `json:"state"`
		} `json:"held"`
		HeldDocuments int        `json:"held_documents"`
		Upstreams     []upstream `json:"upstreams"`
	} `json:"databases"`
}

type upstream struct {
	Name      string `json:"name"`
	State     string `json:"state"`
	Lag       int    `json:"lag"`
	LagPush   int    `json:"lag_push"`
	LagPull   int    `json:"lag_pull"`
	Errors    uint64 `json:"errors"`
	Resets    uint64 `json:"resets"`
	Pulled    uint64 `json:"docs_pulled"`
	Pushed    uint64 `json:"docs_pushed"`
	LastError string `json:"last_error"`
}

func (r *relay) status(ctx context.Context) (status, error) {
	var s status
	b, err := r.get(ctx, "/status")
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil || len(s.Databases) != 1 {
		return s, fmt.Errorf("/status: %v: %.300s", err, b)
	}
	return s, nil
}

// poll checks ok every interval until it holds or the deadline passes.
func poll(ctx context.Context, interval time.Duration, ok func() bool) bool {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for !ok() {
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
	return true
}

// cli runs the livesync command with a fixed environment.
type cli struct {
	bin  string
	home string
	env  []string
}

// run runs a command with a timeout; it returns the output and an error
// that includes stderr when the exit status is not 0.
func (c *cli) run(ctx context.Context, stdin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.Env = append([]string{"HOME=" + c.home, "TMPDIR=" + os.TempDir()}, c.env...)
	cmd.Dir = c.home
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		err = fmt.Errorf("livesync %s: exit %d: %s", args[0], ee.ExitCode(), strings.TrimSpace(errb.String()))
	}
	return out.String(), err
}

// withUser puts user into a URL (never the password).
func withUser(raw, user string) string {
	u, _ := url.Parse(raw)
	u.User = url.User(user)
	return u.String()
}
