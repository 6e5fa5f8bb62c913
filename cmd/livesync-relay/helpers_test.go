package main

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livesync-go/livesync-go/engine/livesync"
)

func TestMain(m *testing.M) {
	// CouchDB's 600,000 PBKDF2 rounds cost ~0.1 s per hash (seconds under
	// -race); the tests only need the format.
	passwordIterations = 1000
	os.Exit(m.Run())
}

// syncBuffer is an io.Writer safe for concurrent use (the relay's log and
// banner).
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// running is a relay run in-process by run(), as main does.
type running struct {
	t      *testing.T
	r      *relay
	url    string
	out    *syncBuffer
	cancel context.CancelFunc
	done   chan int
	code   int
	user   string
	pass   string
}

// envOf returns a getenv over m.
func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// launch runs the relay with args (plus --listen 127.0.0.1:0 unless args
// set --listen) and waits until it serves, or returns the exit code it
// failed with (then r is nil).
func launch(t *testing.T, args []string, env map[string]string) (*running, int) {
	t.Helper()
	if !strings.Contains(strings.Join(args, " "), "--listen") {
		args = append([]string{"--listen", "127.0.0.1:0"}, args...)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rn := &running{t: t, out: &syncBuffer{}, cancel: cancel, done: make(chan int, 1)}
	ready := make(chan *relay, 1)
	go func() { rn.done <- run(ctx, args, envOf(env), rn.out, func(r *relay) { ready <- r }) }()
	select {
	case r := <-ready:
		rn.r, rn.url = r, r.url
	case code := <-rn.done:
		cancel()
		return nil, code
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatalf("the relay did not start; output:\n%s", rn.out)
	}
	t.Cleanup(func() { rn.stop() })
	return rn, 0
}

// start is launch for a relay that must start.
func start(t *testing.T, args []string, env map[string]string) *running {
	t.Helper()
	rn, code := launch(t, args, env)
	if rn == nil {
		t.Fatalf("the relay exited with %d", code)
	}
	return rn
}

// stop shuts the relay down as a signal does and returns its exit code.
func (rn *running) stop() int {
	if rn.done == nil {
		return rn.code
	}
	rn.cancel()
	select {
	case rn.code = <-rn.done:
	case <-time.After(60 * time.Second):
		rn.t.Fatalf("the relay did not stop; output:\n%s", rn.out)
	}
	rn.done = nil
	return rn.code
}

var passwordLine = regexp.MustCompile(`(?m)^\s+user:\s+(\S+)\n\s+password:\s+(\S+)$`)

// credentials reads the admin's user and password from a first start's
// banner.
func (rn *running) credentials() (string, string) {
	rn.t.Helper()
	m := passwordLine.FindStringSubmatch(rn.out.String())
	if m == nil {
		rn.t.Fatalf("no credentials in the output:\n%s", rn.out)
	}
	return m[1], m[2]
}

// do sends one request as user (no credentials when user is "") and
// returns the status and body.
func (rn *running) do(method, path, user, pass string, body any) (int, []byte) {
	rn.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			rn.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, rn.url+path, rd)
	if err != nil {
		rn.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		rn.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		rn.t.Fatalf("%s %s: reading the body: %v", method, path, err)
	}
	return resp.StatusCode, b
}

// admin sends a request with the admin's credentials and wants want.
func (rn *running) admin(method, path string, body any, want int) []byte {
	rn.t.Helper()
	code, b := rn.do(method, path, rn.user, rn.pass, body)
	if code != want {
		rn.t.Fatalf("%s %s: %d %s, want %d", method, path, code, b, want)
	}
	return b
}

// status reads /status as the admin.
func (rn *running) status() statusDoc {
	rn.t.Helper()
	var s statusDoc
	if err := json.Unmarshal(rn.admin("GET", "/status", nil, 200), &s); err != nil {
		rn.t.Fatal(err)
	}
	return s
}

func (s statusDoc) db(t *testing.T, name string) dbStatus {
	t.Helper()
	for _, d := range s.Databases {
		if d.Name == name {
			return d
		}
	}
	t.Fatalf("no database %q in /status: %+v", name, s)
	return dbStatus{}
}

// changedIDs lists the ids in the database's _changes feed.
func (rn *running) changedIDs(db string) []string {
	rn.t.Helper()
	var c struct {
		Results []struct {
			ID string `json:"id"`
		} `json:"results"`
	}
	if err := json.Unmarshal(rn.admin("GET", "/"+db+"/_changes", nil, 200), &c); err != nil {
		rn.t.Fatal(err)
	}
	ids := []string{}
	for _, r := range c.Results {
		ids = append(ids, r.ID)
	}
	return ids
}

// pushDocs sends docs with _bulk_docs new_edits=false, as the plugin's
// replication does, and wants every row accepted.
func (rn *running) pushDocs(db string, docs ...livesync.Doc) {
	rn.t.Helper()
	b := rn.admin("POST", "/"+db+"/_bulk_docs", map[string]any{"docs": docs, "new_edits": false}, 201)
	var rows []map[string]any
	if err := json.Unmarshal(b, &rows); err != nil {
		rn.t.Fatal(err)
	}
	for _, r := range rows {
		if r["error"] != nil {
			rn.t.Fatalf("_bulk_docs row refused: %v", r)
		}
	}
}

// withRev gives a remote-form document a first revision and its history,
// as a replicator sends it.
func withRev(d livesync.Doc) livesync.Doc {
	b, _ := json.Marshal(d)
	sum := md5.Sum(b)
	h := hex.EncodeToString(sum[:])
	out := d.Clone()
	out["_rev"] = json.RawMessage(`"1-` + h + `"`)
	out["_revisions"] = json.RawMessage(fmt.Sprintf(`{"start":1,"ids":[%q]}`, h))
	return out
}

// note returns a file's metadata and chunks in the remote form codec
// writes.
func note(t *testing.T, codec *livesync.Codec, path, text string) (meta livesync.Doc, chunks []livesync.Doc) {
	t.Helper()
	m, cs, err := codec.FileDocs(path, []byte(text), 1700000000000, 1700000000000)
	if err != nil {
		t.Fatal(err)
	}
	rm, err := codec.EncodeRemote(m.Doc())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		rc, err := codec.EncodeRemote(livesync.ChunkDoc(c))
		if err != nil {
			t.Fatal(err)
		}
		chunks = append(chunks, withRev(rc))
	}
	return withRev(rm), chunks
}

func plainCodec(t *testing.T) *livesync.Codec {
	t.Helper()
	c, err := livesync.New(livesync.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
