package deploy_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	yaml "go.yaml.in/yaml/v3"
)

const dockerDir = "docker"

// TestDockerfile: a multi-stage build whose build command (run here with
// go build, as the image would run it) makes a static binary; a final
// stage that runs it as a non-root user with the data in a volume, the
// CouchDB port exposed and a HEALTHCHECK of `livesync-relay healthcheck`;
// the configuration baked into the image is one the relay accepts.
func TestDockerfile(t *testing.T) {
	df, err := readDockerfile(filepath.Join(dockerDir, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	env, args, err := dockerfileBuild(filepath.Join(dockerDir, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(env, "CGO_ENABLED=0") || !slices.Contains(args, "-trimpath") || args[0] != "build" {
		t.Errorf("build command: env %v, go %v; want CGO_ENABLED=0 go build -trimpath", env, args)
	}
	bin := relayBinary(t)
	if !isStatic(t, bin) {
		t.Errorf("%v go %v made a dynamically linked binary: it cannot run on a static base image", env, args)
	}

	final := df[len(df)-1].stage
	if final < 2 {
		t.Errorf("one stage: want a build stage and a small final one")
	}
	last := map[string]string{} // the final stage's instructions (the last of each)
	var copies []string
	for _, ins := range df {
		if ins.stage != final {
			continue
		}
		last[ins.cmd] = ins.args
		if ins.cmd == "COPY" && !strings.Contains(ins.args, "--from=") {
			copies = append(copies, ins.args)
		}
	}
	if u := last["USER"]; u == "" || u == "root" || u == "0" || strings.HasPrefix(u, "0:") {
		t.Errorf("final stage USER %q: want a non-root user", u)
	}
	if !strings.Contains(last["VOLUME"], "/data") || !strings.Contains(last["EXPOSE"], "5984") {
		t.Errorf("VOLUME %q, EXPOSE %q: want /data and 5984", last["VOLUME"], last["EXPOSE"])
	}
	hc := last["HEALTHCHECK"]
	if !regexp.MustCompile(`CMD \["[^"]*livesync-relay", "healthcheck"`).MatchString(hc) {
		t.Errorf("HEALTHCHECK %q: want CMD [\".../livesync-relay\", \"healthcheck\", ...]", hc)
	}
	if !strings.Contains(last["ENTRYPOINT"], "livesync-relay") {
		t.Errorf("ENTRYPOINT %q", last["ENTRYPOINT"])
	}
	// The configuration the image reads is the one copied into it, and
	// the relay accepts it.
	cfgPath := strings.TrimPrefix(last["ENV"], "LIVESYNC_RELAY_CONFIG=")
	var baked string
	for _, c := range copies {
		if f := strings.Fields(c); len(f) == 2 && f[1] == cfgPath {
			baked = filepath.Join(repoRoot, f[0])
		}
	}
	if baked == "" {
		t.Fatalf("ENV %q: no COPY of a configuration to that path (copies %v)", last["ENV"], copies)
	}
	checkConfig(t, baked, nil)
	var cfg struct {
		Listen  string `toml:"listen"`
		DataDir string `toml:"data_dir"`
	}
	if _, err := toml.DecodeFile(baked, &cfg); err != nil || cfg.DataDir != "/data" || !strings.HasSuffix(cfg.Listen, ":5984") {
		t.Errorf("%s: listen %q, data_dir %q (%v); want :5984 and the volume /data", baked, cfg.Listen, cfg.DataDir, err)
	}
	// The subcommand the HEALTHCHECK runs is in the binary.
	if out, err := exec.Command(bin, "healthcheck", "-h").CombinedOutput(); err != nil || !strings.Contains(string(out), "usage: livesync-relay healthcheck") {
		t.Errorf("healthcheck -h: %v %s", err, out)
	}
}

// compose is the part of the Compose format compose.yml uses; decoding
// is strict, so a misspelt key fails.
type compose struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image       string `yaml:"image"`
	Build       *struct{ Context, Dockerfile string }
	Restart     string                                `yaml:"restart"`
	DependsOn   map[string]struct{ Condition string } `yaml:"depends_on"`
	Environment map[string]string                     `yaml:"environment"`
	Volumes     []string                              `yaml:"volumes"`
	Ports       []string                              `yaml:"ports"`
	Entrypoint  []string                              `yaml:"entrypoint"`
	Command     []string                              `yaml:"command"`
	Healthcheck *struct {
		Test        []string `yaml:"test"`
		Interval    string   `yaml:"interval"`
		Timeout     string   `yaml:"timeout"`
		Retries     int      `yaml:"retries"`
		StartPeriod string   `yaml:"start_period"`
	} `yaml:"healthcheck"`
	StopGracePeriod string `yaml:"stop_grace_period"`
}

// composeVar is an interpolation from .env: ${NAME}, ${NAME:-x}, ${NAME:?x}.
var composeVar = regexp.MustCompile(`(^|[^$])\$\{([A-Za-z_][A-Za-z0-9_]*)(:?[-?][^}]*)?\}`)

// shellVar is what a service's script reads from its environment ($$NAME).
var shellVar = regexp.MustCompile(`\$\$\{?([A-Za-z_][A-Za-z0-9_]*)`)

// TestCompose: compose.yml parses (strictly), every service it depends on
// exists with what the condition needs, every named volume is declared
// and used, every variable comes from .env.example, the relay mounts a
// configuration the relay accepts (with .env.example's values) where the
// image reads it, keeps its data in a named volume, and reaches its
// upstreams at the services' names and ports.
func TestCompose(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(dockerDir, "compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var c compose
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("compose.yml: %v", err)
	}
	for _, want := range []string{"relay", "couchdb", "minio"} {
		if svc, ok := c.Services[want]; !ok || svc.Healthcheck == nil || len(svc.Healthcheck.Test) == 0 {
			t.Errorf("service %s missing or without a healthcheck", want)
		}
	}
	checkComposeRefs(t, c)
	env := readEnvExample(t)
	checkComposeVars(t, c, string(raw), env)
	checkComposeRelay(t, c, env)
}

func checkComposeRefs(t *testing.T, c compose) {
	used := map[string]bool{}
	for name, svc := range c.Services {
		if svc.Image == "" && svc.Build == nil {
			t.Errorf("%s: neither image nor build", name)
		}
		for dep, d := range svc.DependsOn {
			target, ok := c.Services[dep]
			switch {
			case !ok:
				t.Errorf("%s depends on %q, not a service", name, dep)
			case d.Condition == "service_healthy" && target.Healthcheck == nil:
				t.Errorf("%s waits for %s to be healthy, which has no healthcheck", name, dep)
			case d.Condition == "service_completed_successfully" && target.Restart != "no":
				t.Errorf("%s waits for %s to complete, which restarts (%q)", name, dep, target.Restart)
			case !slices.Contains([]string{"service_started", "service_healthy", "service_completed_successfully"}, d.Condition):
				t.Errorf("%s depends on %s with condition %q", name, dep, d.Condition)
			}
		}
		for _, v := range svc.Volumes {
			src, rest, ok := strings.Cut(v, ":")
			if !ok || !strings.HasPrefix(rest, "/") {
				t.Errorf("%s: volume %q is not SOURCE:/PATH[:ro]", name, v)
				continue
			}
			if strings.HasPrefix(src, ".") || strings.HasPrefix(src, "/") {
				if _, err := os.Stat(filepath.Join(dockerDir, src)); err != nil {
					t.Errorf("%s mounts %s: %v", name, src, err)
				}
				continue
			}
			used[src] = true
			if _, ok := c.Volumes[src]; !ok {
				t.Errorf("%s mounts volume %q, which is not declared", name, src)
			}
		}
		if svc.Build != nil {
			if _, err := os.Stat(filepath.Join(dockerDir, svc.Build.Context, svc.Build.Dockerfile)); err != nil {
				t.Errorf("%s: build: %v", name, err)
			}
		}
	}
	for v := range c.Volumes {
		if !used[v] {
			t.Errorf("volume %q is declared but not mounted", v)
		}
	}
}

func readEnvExample(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dockerDir, ".env.example"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf(".env.example: %q is not NAME=value", line)
		}
		env[k] = v
	}
	return env
}

// checkComposeVars: what compose.yml takes from .env is in .env.example
// (unless it has a default) and nothing there is unused; what a
// service's script or healthcheck reads is in its environment.
func checkComposeVars(t *testing.T, c compose, raw string, env map[string]string) {
	used := map[string]bool{}
	for _, m := range composeVar.FindAllStringSubmatch(raw, -1) {
		used[m[2]] = true
		if _, ok := env[m[2]]; !ok && !strings.HasPrefix(m[3], ":-") {
			t.Errorf("compose.yml uses ${%s}, which .env.example does not set", m[2])
		}
	}
	for k := range env {
		if !used[k] {
			t.Errorf(".env.example sets %s, which compose.yml does not use", k)
		}
	}
	for name, svc := range c.Services {
		script := strings.Join(append(slices.Clone(svc.Entrypoint), svc.Command...), "\n")
		if svc.Healthcheck != nil {
			script += "\n" + strings.Join(svc.Healthcheck.Test, " ")
		}
		own := regexp.MustCompile(`(?m)(?:^|[\s;])([A-Za-z_][A-Za-z0-9_]*)=`).FindAllStringSubmatch(script, -1)
		for _, m := range shellVar.FindAllStringSubmatch(script, -1) {
			if _, ok := svc.Environment[m[1]]; !ok && !slices.ContainsFunc(own, func(o []string) bool { return o[1] == m[1] }) {
				t.Errorf("%s: its script reads $%s, which is neither in its environment nor set by the script", name, m[1])
			}
		}
	}
}

// checkComposeRelay checks the relay service against its configuration
// and the image.
func checkComposeRelay(t *testing.T, c compose, env map[string]string) {
	relay := c.Services["relay"]
	if relay.Build == nil || relay.Build.Dockerfile != "deploy/docker/Dockerfile" {
		t.Fatalf("relay: build %+v; want deploy/docker/Dockerfile", relay.Build)
	}
	if hc := relay.Healthcheck; hc == nil || len(hc.Test) < 3 || hc.Test[0] != "CMD" || !strings.HasSuffix(hc.Test[1], "livesync-relay") || hc.Test[2] != "healthcheck" {
		t.Errorf("relay healthcheck %+v: want [CMD, .../livesync-relay, healthcheck, ...]", relay.Healthcheck)
	}
	if !slices.Contains(relay.Volumes, "./relay.toml:/etc/livesync-relay/relay.toml:ro") {
		t.Errorf("relay: relay.toml is not mounted read-only where the image reads its configuration: %v", relay.Volumes)
	}
	if !slices.ContainsFunc(relay.Volumes, func(v string) bool { return strings.HasSuffix(v, ":/data") && !strings.HasPrefix(v, ".") }) {
		t.Errorf("relay: no named volume at /data: %v", relay.Volumes)
	}
	for _, dep := range []string{"couchdb-setup", "minio-setup"} {
		if relay.DependsOn[dep].Condition != "service_completed_successfully" {
			t.Errorf("relay does not wait for %s", dep)
		}
	}
	cfgFile := filepath.Join(dockerDir, "relay.toml")
	var cfg map[string]any
	if _, err := toml.DecodeFile(cfgFile, &cfg); err != nil {
		t.Fatal(err)
	}
	// Every variable the configuration names is passed to the relay, and
	// the relay accepts it with .env.example's values.
	var vars []string
	for _, name := range envNames(cfg) {
		if _, ok := relay.Environment[name]; !ok {
			t.Errorf("relay.toml reads $%s, which the relay service's environment does not set", name)
		}
	}
	for k, v := range relay.Environment {
		if m := composeVar.FindStringSubmatch(v); m != nil {
			v = env[m[2]]
		}
		vars = append(vars, k+"="+v)
	}
	checkConfig(t, cfgFile, vars)
	checkUpstreams(t, c, cfg)
}

// envNames lists the values of every *_env key, at any depth.
func envNames(v any) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && strings.HasSuffix(k, "_env") {
				out = append(out, s)
			}
			out = append(out, envNames(x)...)
		}
	case []map[string]any:
		for _, x := range v {
			out = append(out, envNames(x)...)
		}
	}
	return out
}

// checkUpstreams: each upstream of relay.toml is a service of
// compose.yml, on the port that service listens on.
func checkUpstreams(t *testing.T, c compose, cfg map[string]any) {
	b, _ := json.Marshal(cfg)
	var doc struct {
		Databases []struct {
			Upstreams []struct {
				Name, Kind, URL, Endpoint string
			}
		}
	}
	json.Unmarshal(b, &doc)
	ports := map[string]string{"couchdb": "5984", "minio": "9000"}
	n := 0
	for _, db := range doc.Databases {
		for _, u := range db.Upstreams {
			n++
			addr := strings.TrimPrefix(strings.TrimPrefix(u.URL+u.Endpoint, "http://"), "https://")
			host, port, _ := strings.Cut(addr, ":")
			if _, ok := c.Services[host]; !ok || ports[host] != port {
				t.Errorf("upstream %s (%s) points at %q: want a service of compose.yml on its port", u.Name, u.Kind, addr)
			}
		}
	}
	if n != 2 {
		t.Errorf("relay.toml has %d upstreams; want the CouchDB and the MinIO one", n)
	}
	if !strings.Contains(strings.Join(c.Services["minio"].Command, " "), "--address :9000") {
		t.Errorf("minio does not listen on :9000: %v", c.Services["minio"].Command)
	}
}
