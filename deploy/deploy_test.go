// Package deploy_test checks the deployment files under deploy/ (the
// systemd unit, the Docker image and compose file, the Prometheus alert
// rules) against the relay they deploy: the binary built exactly as the
// Dockerfile builds it. There is no container engine or Prometheus here,
// so what they would refuse is checked statically, and what the relay
// must provide (a configuration it accepts, the metrics the alerts
// name, the health check) against a running relay.
package deploy_test

import (
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// repoRoot is the repository, the Dockerfile's build context.
const repoRoot = ".."

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
	buildDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// relayBinary builds the relay once with the Dockerfile's own build
// command (its environment and flags; only -o is changed) and returns
// the binary's path.
func relayBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		var env, args []string
		env, args, buildErr = dockerfileBuild(filepath.Join(repoRoot, "deploy/docker/Dockerfile"))
		if buildErr != nil {
			return
		}
		if buildDir, buildErr = os.MkdirTemp("", "deploy-test-"); buildErr != nil {
			return
		}
		binary = filepath.Join(buildDir, "livesync-relay")
		for i, a := range args {
			if a == "-o" && i+1 < len(args) {
				args[i+1] = binary
			}
		}
		cmd := exec.Command("go", args...)
		cmd.Dir = repoRoot
		cmd.Env = append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binary
}

// dockerfileBuild finds the Dockerfile's `RUN VAR=x go build ...` and
// returns its environment assignments and the arguments after "go".
func dockerfileBuild(path string) (env, args []string, err error) {
	df, err := readDockerfile(path)
	if err != nil {
		return nil, nil, err
	}
	for _, ins := range df {
		if ins.cmd != "RUN" || !strings.Contains(ins.args, "go build") {
			continue
		}
		words, err := shellWords(ins.args)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: RUN %s: %v", path, ins.args, err)
		}
		for i, w := range words {
			if w == "go" {
				return words[:i], words[i+1:], nil
			}
			if !strings.Contains(w, "=") {
				break
			}
		}
		return nil, nil, fmt.Errorf("%s: RUN %s: not VAR=value... go build ...", path, ins.args)
	}
	return nil, nil, fmt.Errorf("%s: no RUN ... go build", path)
}

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd, args string
	stage     int // the build stage (counting FROMs from 1)
}

func readDockerfile(path string) ([]instruction, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []instruction
	var cur strings.Builder
	stage := 0
	for _, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur.WriteString(strings.TrimSuffix(trimmed, "\\") + " ")
			continue
		}
		cur.WriteString(trimmed)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		cur.Reset()
		cmd = strings.ToUpper(cmd)
		if cmd == "FROM" {
			stage++
		}
		out = append(out, instruction{cmd: cmd, args: strings.TrimSpace(args), stage: stage})
	}
	return out, nil
}

// shellWords splits a command line as sh does for plain words and
// quotes (no expansions).
func shellWords(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			w.WriteRune(r)
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated %c", quote)
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// freeAddr returns a loopback address nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// relayProc is a relay binary running for a test.
type relayProc struct {
	url string
	cmd *exec.Cmd
	log *bytes.Buffer
}

// startRelay runs the binary with a configuration (TOML) and env, and
// waits until `livesync-relay healthcheck` (what the image's
// HEALTHCHECK runs) says it is healthy.
func startRelay(t *testing.T, config string, env []string) *relayProc {
	t.Helper()
	bin := relayBinary(t)
	cfg := filepath.Join(t.TempDir(), "relay.toml")
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	env = append(append(os.Environ(), "LIVESYNC_RELAY_CONFIG="+cfg), env...)
	p := &relayProc{cmd: exec.Command(bin), log: &bytes.Buffer{}}
	p.cmd.Env, p.cmd.Stderr = env, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		p.cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			p.cmd.Process.Kill()
			<-exited
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		hc := exec.Command(bin, "healthcheck", "--timeout", "1s")
		hc.Env = env
		out, err := hc.CombinedOutput()
		line := strings.TrimSpace(string(out))
		if err == nil {
			_, rest, _ := strings.Cut(line, "healthy: ")
			p.url = strings.TrimSuffix(strings.Fields(rest)[0], "/healthz")
			return p
		}
		select {
		case err := <-exited:
			t.Fatalf("the relay exited (%v); its log:\n%s", err, p.log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("not healthy after 30s: %s; the relay's log:\n%s", line, p.log)
		}
		time.Sleep(100 * time.Millisecond) // polling a separate process: no event to wait on
	}
}

// get fetches path from the relay.
func (p *relayProc) get(t *testing.T, path string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.url+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b.String())
	}
	return b.String()
}

// checkConfig runs `livesync-relay --check-config` on a configuration.
func checkConfig(t *testing.T, path string, env []string) {
	t.Helper()
	cmd := exec.Command(relayBinary(t), "--config", path, "--check-config")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "configuration OK") {
		t.Errorf("--check-config %s: %v\n%s", path, err, out)
	}
}

// isStatic reports an ELF executable without a dynamic loader (what a
// distroless static or scratch image can run).
func isStatic(t *testing.T, path string) bool {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false
		}
	}
	return true
}
