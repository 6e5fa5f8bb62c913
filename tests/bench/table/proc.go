//go:build linux

package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// server is a CouchDB-protocol server: the test server or the relay.
type server struct {
	name, url, user, password string
	pid                       int
}

// remote is the URL `livesync` takes for database db (the password comes
// from LIVESYNC_PASSWORD).
func (s *server) remote(db string) string {
	u, _ := url.Parse(s.url)
	u.User = url.User(s.user)
	return u.String() + "/" + db
}

func (s *server) do(method, path string, body []byte) (int, []byte, error) {
	req, err := http.NewRequest(method, s.url+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.SetBasicAuth(s.user, s.password)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func (s *server) create(db string) error {
	code, b, err := s.do("PUT", "/"+db, nil)
	if err == nil && code != 201 && code != 202 {
		err = fmt.Errorf("PUT /%s: %d %s", db, code, b)
	}
	return err
}

func (s *server) drop(db string) {
	_, _, _ = s.do("DELETE", "/"+db, nil)
}

func (s *server) docCount(db string) (int, error) {
	code, b, err := s.do("GET", "/"+db, nil)
	if err != nil {
		return 0, err
	}
	var info struct {
		DocCount int `json:"doc_count"`
	}
	if code != 200 || json.Unmarshal(b, &info) != nil {
		return 0, fmt.Errorf("GET /%s: %d %s", db, code, b)
	}
	return info.DocCount, nil
}

// cpuMs is the server process's user+system CPU time so far, in ms.
func (s *server) cpuMs() float64 {
	if s.pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	u, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (u + st) * 10 // clock ticks of 10 ms
}

type relayProc struct {
	server
	cmd  *exec.Cmd
	done chan struct{}
}

// startRelay starts livesync-relay on a fresh data folder with a random
// admin password and waits until it serves its default database.
func startRelay(o options) (*relayProc, error) {
	dir := filepath.Join(o.work, "relay")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	conf := fmt.Sprintf("listen = \"127.0.0.1:%d\"\ndata_dir = %q\n\n[log]\nlevel = \"warn\"\n\n[[databases]]\nname = \"vault\"\n",
		port, filepath.Join(dir, "data"))
	if err := os.WriteFile(filepath.Join(dir, "relay.toml"), []byte(conf), 0o600); err != nil {
		return nil, err
	}
	r := &relayProc{server: server{name: "relay", url: fmt.Sprintf("http://127.0.0.1:%d", port), user: "admin",
		password: randomHex()}, done: make(chan struct{})}
	logf, err := os.Create(filepath.Join(dir, "relay.log"))
	if err != nil {
		return nil, err
	}
	r.cmd = exec.Command(o.exe("livesync-relay"), "--config", filepath.Join(dir, "relay.toml"))
	r.cmd.Dir = dir
	r.cmd.Env = append(os.Environ(), "LIVESYNC_RELAY_ADMIN_USER=admin", "LIVESYNC_RELAY_ADMIN_PASSWORD="+r.password)
	r.cmd.Stdout, r.cmd.Stderr = logf, logf
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		return nil, err
	}
	r.pid = r.cmd.Process.Pid
	go func() { r.cmd.Wait(); logf.Close(); close(r.done) }()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		select {
		case <-r.done:
			b, _ := os.ReadFile(filepath.Join(dir, "relay.log"))
			return nil, fmt.Errorf("the relay exited:\n%s", b)
		case <-time.After(100 * time.Millisecond):
		}
		if code, _, _ := r.do("GET", "/vault", nil); code == 200 {
			return r, nil
		}
	}
	r.stop()
	return nil, fmt.Errorf("the relay did not answer within a minute")
}

func (r *relayProc) stop() {
	r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		r.cmd.Process.Kill()
		<-r.done
	}
}

// proc is one finished child process.
type proc struct {
	out       []byte
	wallMs    float64
	maxRssKiB int64
}

// runProc runs a command to its end with extra environment; a failure
// includes its stderr.
func runProc(env []string, name string, args ...string) (proc, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	p := proc{out: stdout.Bytes(), wallMs: float64(time.Since(start).Microseconds()) / 1000}
	logf("  %.1f s: %s %s", p.wallMs/1000, filepath.Base(name), strings.Join(args[:min(len(args), 3)], " "))
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			p.maxRssKiB = ru.Maxrss
		}
	}
	if err != nil {
		tail := stderr.String()
		if len(tail) > 2000 {
			tail = tail[len(tail)-2000:]
		}
		return p, fmt.Errorf("%s %s: %w\n%s", filepath.Base(name), strings.Join(args, " "), err, tail)
	}
	return p, nil
}

// lastJSON decodes the last line of out that is a JSON object.
func lastJSON(out []byte, v any) error {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "{") {
			return json.Unmarshal([]byte(lines[i]), v)
		}
	}
	return fmt.Errorf("no JSON line in %q", out)
}

func randomHex() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
