package tests

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	yaml "go.yaml.in/yaml/v3"
)

// The scale-out deployment (deploy/scaleout: compose.yml, Caddyfile,
// relay.toml, Dockerfile) cannot be started here: there is no container
// engine. TestScaleoutCompose checks what `docker compose config` and the
// programs themselves would refuse, and that the files agree with each
// other: every service, network, volume and variable a service names
// exists; the relays' configuration is one the relay accepts; Caddy
// balances over exactly the relay services, on the port they listen on.

const scaleoutDir = "../deploy/scaleout"

// composeFile is the part of the Compose format the deployment uses.
// Decoding is strict (an unknown key is an error); top-level keys other
// than these must be extension fields ("x-…").
type composeFile struct {
	Services   map[string]composeService `yaml:"services"`
	Networks   map[string]any            `yaml:"networks"`
	Volumes    map[string]any            `yaml:"volumes"`
	Extensions map[string]any            `yaml:",inline"`
}

type composeService struct {
	Image       string                    `yaml:"image"`
	Build       *composeBuild             `yaml:"build"`
	Restart     string                    `yaml:"restart"`
	DependsOn   map[string]composeDepends `yaml:"depends_on"`
	Environment map[string]string         `yaml:"environment"`
	Volumes     []string                  `yaml:"volumes"`
	Networks    yaml.Node                 `yaml:"networks"` // a list, or a map with aliases
	Ports       []string                  `yaml:"ports"`
	ReadOnly    bool                      `yaml:"read_only"`
	Entrypoint  []string                  `yaml:"entrypoint"`
	Command     []string                  `yaml:"command"`
	Healthcheck *struct {
		Test     []string `yaml:"test"`
		Interval string   `yaml:"interval"`
		Retries  int      `yaml:"retries"`
	} `yaml:"healthcheck"`
}

type composeBuild struct {
	Context    string `yaml:"context"`
	Dockerfile string `yaml:"dockerfile"`
}

type composeDepends struct {
	Condition string `yaml:"condition"`
}

// scaleout is the deployment as read from its files.
type scaleout struct {
	raw      string            // compose.yml as written
	compose  composeFile       // compose.yml decoded (anchors and merges resolved)
	env      map[string]string // .env.example
	caddy    string            // the Caddyfile
	relayCfg map[string]any    // relay.toml
}

func TestScaleoutCompose(t *testing.T) {
	t.Parallel()
	s := readScaleout(t)
	s.checkReferences(t)
	s.checkVariables(t)
	s.checkCouchDBCluster(t)
	relays := s.checkRelays(t)
	s.checkRelayConfig(t)
	s.checkCaddy(t, relays)
	s.checkDockerfile(t)
}

func readScaleout(t *testing.T) *scaleout {
	t.Helper()
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(scaleoutDir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	s := &scaleout{raw: string(read("compose.yml")), caddy: string(read("Caddyfile")), env: map[string]string{}}
	dec := yaml.NewDecoder(bytes.NewReader([]byte(s.raw)))
	dec.KnownFields(true)
	if err := dec.Decode(&s.compose); err != nil {
		t.Fatalf("compose.yml: %v", err)
	}
	for k := range s.compose.Extensions {
		if !strings.HasPrefix(k, "x-") {
			t.Errorf("compose.yml: unknown top-level key %q", k)
		}
	}
	for _, line := range strings.Split(string(read(".env.example")), "\n") {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf(".env.example: %q is not NAME=value", line)
		}
		s.env[k] = v
	}
	if _, err := toml.Decode(string(read("relay.toml")), &s.relayCfg); err != nil {
		t.Fatalf("relay.toml: %v", err)
	}
	return s
}

// serviceNetworks returns the networks a service joins and the names it
// has on each (its aliases; the service name is always one).
func serviceNetworks(t *testing.T, name string, n yaml.Node) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	switch n.Kind {
	case 0:
		out["default"] = nil
	case yaml.SequenceNode:
		var list []string
		if err := n.Decode(&list); err != nil {
			t.Fatalf("%s: networks: %v", name, err)
		}
		for _, nw := range list {
			out[nw] = nil
		}
	case yaml.MappingNode:
		var m map[string]*struct {
			Aliases []string `yaml:"aliases"`
		}
		if err := n.Decode(&m); err != nil {
			t.Fatalf("%s: networks: %v", name, err)
		}
		for nw, v := range m {
			if v != nil {
				out[nw] = v.Aliases
			} else {
				out[nw] = nil
			}
		}
	default:
		t.Fatalf("%s: networks is neither a list nor a map", name)
	}
	for nw := range out {
		out[nw] = append(out[nw], name)
	}
	return out
}

// checkReferences checks that what each service depends on, mounts and
// joins exists, and that every declared volume and network is used.
func (s *scaleout) checkReferences(t *testing.T) {
	usedVolumes, usedNetworks := map[string]bool{}, map[string]bool{}
	for name, svc := range s.compose.Services {
		if svc.Image == "" && svc.Build == nil {
			t.Errorf("%s: neither image nor build", name)
		}
		for dep, d := range svc.DependsOn {
			target, ok := s.compose.Services[dep]
			switch {
			case !ok:
				t.Errorf("%s depends on %q, which is not a service", name, dep)
			case d.Condition == "service_healthy" && target.Healthcheck == nil:
				t.Errorf("%s waits for %s to be healthy, which has no healthcheck", name, dep)
			case d.Condition == "service_completed_successfully" && target.Restart != "no":
				t.Errorf("%s waits for %s to complete, which restarts (%q)", name, dep, target.Restart)
			case !slices.Contains([]string{"service_started", "service_healthy", "service_completed_successfully"}, d.Condition):
				t.Errorf("%s depends on %s with condition %q", name, dep, d.Condition)
			}
		}
		for _, v := range svc.Volumes {
			parts := strings.Split(v, ":")
			if len(parts) < 2 || !strings.HasPrefix(parts[1], "/") {
				t.Errorf("%s: volume %q is not SOURCE:/PATH[:ro]", name, v)
				continue
			}
			if strings.HasPrefix(parts[0], ".") || strings.HasPrefix(parts[0], "/") {
				if _, err := os.Stat(filepath.Join(scaleoutDir, parts[0])); err != nil {
					t.Errorf("%s mounts %s: %v", name, parts[0], err)
				}
				continue
			}
			usedVolumes[parts[0]] = true
			if _, ok := s.compose.Volumes[parts[0]]; !ok {
				t.Errorf("%s mounts volume %q, which is not declared", name, parts[0])
			}
		}
		for nw := range serviceNetworks(t, name, svc.Networks) {
			usedNetworks[nw] = true
			if _, ok := s.compose.Networks[nw]; !ok && nw != "default" {
				t.Errorf("%s joins network %q, which is not declared", name, nw)
			}
		}
	}
	for v := range s.compose.Volumes {
		if !usedVolumes[v] {
			t.Errorf("volume %q is declared but no service mounts it", v)
		}
	}
	for nw := range s.compose.Networks {
		if !usedNetworks[nw] {
			t.Errorf("network %q is declared but no service joins it", nw)
		}
	}
}

var (
	// composeVar is an interpolation: ${NAME}, ${NAME:-default},
	// ${NAME:?error}; "$${" is an escaped dollar and does not match.
	composeVar = regexp.MustCompile(`(^|[^$])\$\{([A-Za-z_][A-Za-z0-9_]*)(:?[-?][^}]*)?\}`)
	// shellVar is a variable the container's shell expands ($$NAME or
	// $${NAME} in compose.yml).
	shellVar = regexp.MustCompile(`\$\$\{?([A-Za-z_][A-Za-z0-9_]*)`)
	// shellAssign is a variable a script sets itself.
	shellAssign = regexp.MustCompile(`(?m)(?:^|[\s;(])(?:for\s+)?([A-Za-z_][A-Za-z0-9_]*)(?:=|\s+in\s)`)
)

// checkVariables checks that every variable compose.yml takes from the
// environment (.env) is in .env.example unless it has a default, that
// .env.example has none that is not used, and that the variables a
// service's script reads are in that service's environment.
func (s *scaleout) checkVariables(t *testing.T) {
	used := map[string]bool{}
	for _, m := range composeVar.FindAllStringSubmatch(s.raw, -1) {
		used[m[2]] = true
		if _, ok := s.env[m[2]]; !ok && !strings.HasPrefix(m[3], ":-") && !strings.HasPrefix(m[3], "-") {
			t.Errorf("compose.yml uses ${%s}, which .env.example does not set", m[2])
		}
	}
	for k := range s.env {
		if !used[k] {
			t.Errorf(".env.example sets %s, which compose.yml does not use", k)
		}
	}
	for name, svc := range s.compose.Services {
		script := strings.Join(append(slices.Clone(svc.Entrypoint), svc.Command...), "\n")
		if svc.Healthcheck != nil {
			script += "\n" + strings.Join(svc.Healthcheck.Test, " ")
		}
		own := map[string]bool{}
		for _, m := range shellAssign.FindAllStringSubmatch(strings.ReplaceAll(script, "$$", "$"), -1) {
			own[m[1]] = true
		}
		for _, m := range shellVar.FindAllStringSubmatch(script, -1) {
			if _, ok := svc.Environment[m[1]]; !ok && !own[m[1]] {
				t.Errorf("%s: its script reads $%s, which is neither in its environment nor set by the script", name, m[1])
			}
		}
	}
}

// couchNodes returns the CouchDB services (image couchdb:…), by name.
func (s *scaleout) couchNodes() []string {
	var nodes []string
	for name, svc := range s.compose.Services {
		if strings.HasPrefix(svc.Image, "couchdb:") {
			nodes = append(nodes, name)
		}
	}
	slices.Sort(nodes)
	return nodes
}

// checkCouchDBCluster checks the three CouchDB nodes share what a cluster
// needs, are each reachable under their node name, and that the setup
// job joins exactly these nodes after they are healthy.
func (s *scaleout) checkCouchDBCluster(t *testing.T) {
	nodes := s.couchNodes()
	if len(nodes) != 3 {
		t.Fatalf("CouchDB services %v; want three nodes", nodes)
	}
	var names []string
	first := s.compose.Services[nodes[0]]
	for _, n := range nodes {
		svc := s.compose.Services[n]
		if svc.Image != "couchdb:3.5.0" {
			t.Errorf("%s: image %s; want couchdb:3.5.0", n, svc.Image)
		}
		for _, k := range []string{"COUCHDB_USER", "COUCHDB_PASSWORD", "COUCHDB_SECRET", "ERLANG_COOKIE"} {
			if svc.Environment[k] == "" || svc.Environment[k] != first.Environment[k] {
				t.Errorf("%s: %s is %q, %s has %q: every node needs the same", n, k, svc.Environment[k], nodes[0], first.Environment[k])
			}
		}
		node := svc.Environment["NODENAME"]
		if !strings.Contains(node, ".") {
			t.Errorf("%s: NODENAME %q is not a fully qualified name (Erlang's -name needs one)", n, node)
		}
		if !slices.Contains(serviceNetworks(t, n, svc.Networks)["back"], node) {
			t.Errorf("%s: NODENAME %q is not one of its names on the network the setup job uses", n, node)
		}
		names = append(names, node)
	}
	setup, ok := s.compose.Services["couchdb-setup"]
	if !ok {
		t.Fatal("no couchdb-setup service")
	}
	if got := strings.Fields(setup.Environment["NODES"]); !slices.Equal(got, names) {
		t.Errorf("couchdb-setup joins %v; the nodes are %v", got, names)
	}
	for _, n := range nodes {
		if setup.DependsOn[n].Condition != "service_healthy" {
			t.Errorf("couchdb-setup does not wait for %s to be healthy", n)
		}
	}
	script := strings.Join(setup.Command, "\n")
	for _, want := range []string{`"action":"enable_cluster"`, `"action":"add_node"`, `"action":"finish_cluster"`,
		"chttpd/require_valid_user", "chttpd_auth/require_valid_user", "httpd/WWW-Authenticate", "httpd/enable_cors",
		"chttpd/enable_cors", "chttpd/max_http_request_size", "couchdb/max_document_size", "cors/credentials", "cors/origins"} {
		if !strings.Contains(script, want) {
			t.Errorf("couchdb-setup does not set %s", want)
		}
	}
}

// relayServices returns the services that run the relay (built with the
// deployment's Dockerfile), by name.
func (s *scaleout) relayServices() []string {
	var relays []string
	for name, svc := range s.compose.Services {
		if svc.Build != nil && strings.HasSuffix(svc.Build.Dockerfile, "deploy/scaleout/Dockerfile") {
			relays = append(relays, name)
		}
	}
	slices.Sort(relays)
	return relays
}

// relayEnvNames returns the environment variables relay.toml names
// (every *_env key, at any depth).
func relayEnvNames(v any) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && strings.HasSuffix(k, "_env") {
				out = append(out, s)
			}
			out = append(out, relayEnvNames(x)...)
		}
	case []map[string]any:
		for _, x := range v {
			out = append(out, relayEnvNames(x)...)
		}
	case []any:
		for _, x := range v {
			out = append(out, relayEnvNames(x)...)
		}
	}
	return out
}

// checkRelays checks the relay services: a read-only filesystem, the
// configuration mounted where the command reads it, every environment
// variable it names given, the admin from the environment, and CouchDB
// reachable on a network they share. It returns the relay services.
func (s *scaleout) checkRelays(t *testing.T) []string {
	relays := s.relayServices()
	if len(relays) < 2 {
		t.Fatalf("relay services %v; want at least two", relays)
	}
	store := s.relayStore(t)
	u, err := url.Parse(fmt.Sprint(store["url"]))
	if err != nil {
		t.Fatalf("relay.toml: store url: %v", err)
	}
	for _, name := range relays {
		svc := s.compose.Services[name]
		if !svc.ReadOnly {
			t.Errorf("%s: read_only is not set; the relay keeps nothing local", name)
		}
		i := slices.Index(svc.Command, "--config")
		if i < 0 || i+1 >= len(svc.Command) {
			t.Errorf("%s: command %v has no --config", name, svc.Command)
		} else if !slices.Contains(svc.Volumes, "./relay.toml:"+svc.Command[i+1]+":ro") {
			t.Errorf("%s: reads %s, where relay.toml is not mounted read-only (volumes %v)", name, svc.Command[i+1], svc.Volumes)
		}
		for _, env := range append(relayEnvNames(s.relayCfg), "LIVESYNC_RELAY_ADMIN_USER", "LIVESYNC_RELAY_ADMIN_PASSWORD") {
			if svc.Environment[env] == "" {
				t.Errorf("%s: relay.toml or the admin needs $%s, which its environment does not set", name, env)
			}
		}
		if svc.Environment["COUCHDB_PASSWORD"] != s.compose.Services["couchdb1"].Environment["COUCHDB_PASSWORD"] {
			t.Errorf("%s: COUCHDB_PASSWORD is not the CouchDB admin's", name)
		}
		if !s.reaches(t, name, u.Hostname()) {
			t.Errorf("%s: the store's host %q is no CouchDB node's name on a network %s joins", name, u.Hostname(), name)
		}
		if svc.DependsOn["couchdb-setup"].Condition != "service_completed_successfully" {
			t.Errorf("%s does not wait for couchdb-setup to complete", name)
		}
	}
	if u.Port() != "5984" || u.Scheme != "http" {
		t.Errorf("relay.toml: store url %s; the CouchDB nodes serve http on 5984", u)
	}
	if store["user"] != s.compose.Services["couchdb1"].Environment["COUCHDB_USER"] {
		t.Errorf("relay.toml: store user %v is not the CouchDB admin", store["user"])
	}
	return relays
}

// relayStore returns relay.toml's one database's [databases.store].
func (s *scaleout) relayStore(t *testing.T) map[string]any {
	t.Helper()
	dbs, _ := s.relayCfg["databases"].([]map[string]any)
	if len(dbs) != 1 {
		t.Fatalf("relay.toml: %d [[databases]]; want one", len(dbs))
	}
	store, _ := dbs[0]["store"].(map[string]any)
	if store["kind"] != "couchdb" {
		t.Fatalf("relay.toml: [databases.store] kind = %v; want couchdb", store["kind"])
	}
	return store
}

// reaches reports whether service from shares a network with a CouchDB
// node that answers to host there.
func (s *scaleout) reaches(t *testing.T, from, host string) bool {
	mine := serviceNetworks(t, from, s.compose.Services[from].Networks)
	for _, n := range s.couchNodes() {
		for nw, names := range serviceNetworks(t, n, s.compose.Services[n].Networks) {
			if _, ok := mine[nw]; ok && slices.Contains(names, host) {
				return true
			}
		}
	}
	return false
}

// tomlKeys returns the dotted key paths of a decoded TOML document
// (array-of-tables elements merged under their table's path).
func tomlKeys(prefix string, v any, out map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			out[prefix+k] = true
			tomlKeys(prefix+k+".", x, out)
		}
	case []map[string]any:
		for _, x := range v {
			tomlKeys(prefix, x, out)
		}
	}
}

// checkRelayConfig checks relay.toml is one the relay accepts: with the
// relay's own check (--check-config) when the binary has one, else every
// key in it must be one relay.example.toml documents; no data folder is
// configured.
func (s *scaleout) checkRelayConfig(t *testing.T) {
	if _, ok := s.relayCfg["data_dir"]; ok {
		t.Error("relay.toml sets data_dir; the relays keep nothing local")
	}
	var example map[string]any
	if _, err := toml.DecodeFile("../cmd/livesync-relay/relay.example.toml", &example); err != nil {
		t.Fatal(err)
	}
	known, mine := map[string]bool{}, map[string]bool{}
	tomlKeys("", example, known)
	tomlKeys("", s.relayCfg, mine)
	for k := range mine {
		if !known[k] {
			t.Errorf("relay.toml: %s is not a key of relay.example.toml", k)
		}
	}
	listen := fmt.Sprint(s.relayCfg["listen"])
	if _, port, err := net.SplitHostPort(listen); err != nil || port != "5984" {
		t.Errorf("relay.toml: listen %q; want port 5984 on every interface", listen)
	}
	bin := buildRelay(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	help, _ := exec.CommandContext(ctx, bin, "--help").CombinedOutput()
	if !strings.Contains(string(help), "--check-config") {
		t.Log("the relay has no --check-config: relay.toml checked against relay.example.toml's keys only")
		return
	}
	cmd := exec.CommandContext(ctx, bin, "--check-config", "--config", filepath.Join(scaleoutDir, "relay.toml"))
	cmd.Env = append(os.Environ(), "LIVESYNC_RELAY_ADMIN_USER=admin")
	for name, v := range s.compose.Services[s.relayServices()[0]].Environment {
		if name != "LIVESYNC_RELAY_ADMIN_USER" {
			cmd.Env = append(cmd.Env, name+"=lint-"+strings.ToLower(strings.TrimLeft(v, "${")))
		}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("livesync-relay --check-config relay.toml: %v\n%s", err, out)
	}
}

// caddyUpstreams matches the reverse_proxy line of the Caddyfile.
var caddyUpstreams = regexp.MustCompile(`(?m)^\s*reverse_proxy\s+([^{\n]*)\{`)

// checkCaddy checks the Caddyfile balances round robin over exactly the
// relay services on their port, checks their /healthz, does not buffer
// (changes feeds), reads only variables its service sets, and is
// mounted where Caddy reads it.
func (s *scaleout) checkCaddy(t *testing.T, relays []string) {
	if strings.Count(s.caddy, "{") != strings.Count(s.caddy, "}") {
		t.Error("Caddyfile: unbalanced braces")
	}
	m := caddyUpstreams.FindAllStringSubmatch(s.caddy, -1)
	if len(m) != 1 {
		t.Fatalf("Caddyfile: %d reverse_proxy blocks; want one", len(m))
	}
	_, port, _ := net.SplitHostPort(fmt.Sprint(s.relayCfg["listen"]))
	var want []string
	for _, r := range relays {
		want = append(want, net.JoinHostPort(r, port))
	}
	got := strings.Fields(m[0][1])
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("Caddyfile upstreams %v; the relays listen on %v", got, want)
	}
	for _, d := range []string{"lb_policy round_robin", "health_uri /healthz", "flush_interval -1"} {
		if !regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(d) + `\s*$`).MatchString(s.caddy) {
			t.Errorf("Caddyfile: no %q", d)
		}
	}
	caddy, ok := s.compose.Services["caddy"]
	if !ok {
		t.Fatal("no caddy service")
	}
	for _, v := range regexp.MustCompile(`\{\$([A-Za-z_][A-Za-z0-9_]*)`).FindAllStringSubmatch(s.caddy, -1) {
		if _, ok := caddy.Environment[v[1]]; !ok {
			t.Errorf("Caddyfile reads {$%s}, which the caddy service's environment does not set", v[1])
		}
	}
	if !slices.Contains(caddy.Volumes, "./Caddyfile:/etc/caddy/Caddyfile:ro") {
		t.Errorf("caddy: the Caddyfile is not mounted at /etc/caddy/Caddyfile (volumes %v)", caddy.Volumes)
	}
	mine := serviceNetworks(t, "caddy", caddy.Networks)
	for _, r := range relays {
		if caddy.DependsOn[r].Condition == "" {
			t.Errorf("caddy does not depend on %s", r)
		}
		shared := false
		for nw := range serviceNetworks(t, r, s.compose.Services[r].Networks) {
			_, in := mine[nw]
			shared = shared || in
		}
		if !shared {
			t.Errorf("caddy shares no network with %s", r)
		}
	}
}

// checkDockerfile checks the relay image is built from the Dockerfile
// with the Go release go.mod asks for, from the relay's package.
func (s *scaleout) checkDockerfile(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(scaleoutDir, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range s.relayServices() {
		bd := s.compose.Services[r].Build
		ctxDir := filepath.Join(scaleoutDir, bd.Context)
		if _, err := os.Stat(filepath.Join(ctxDir, bd.Dockerfile)); err != nil {
			t.Errorf("%s: build: %v", r, err)
		}
		if _, err := os.Stat(filepath.Join(ctxDir, "go.mod")); err != nil {
			t.Errorf("%s: the build context %s is not the repository root: %v", r, bd.Context, err)
		}
	}
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goVer := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod)
	if goVer == nil || !strings.Contains(string(b), "FROM golang:"+string(goVer[1])+" ") {
		t.Errorf("Dockerfile: the build stage is not golang:%s (go.mod)", goVer[1])
	}
	if !strings.Contains(string(b), "./cmd/livesync-relay") {
		t.Error("Dockerfile does not build ./cmd/livesync-relay")
	}
	if !strings.Contains(string(b), "CGO_ENABLED=0") {
		t.Error("Dockerfile: the binary is not static (CGO_ENABLED=0), which the distroless static base needs")
	}
}
