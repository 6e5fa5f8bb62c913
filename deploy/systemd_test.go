package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const unitFile = "systemd/livesync-relay.service"

// unitDirectives reads a unit file's Key=Value lines by key (a key given
// twice keeps both values, in order).
func unitDirectives(t *testing.T, text string) map[string][]string {
	t.Helper()
	d := map[string][]string{}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "[") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: %q is not Key=Value", unitFile, line)
		}
		d[k] = append(d[k], v)
	}
	return d
}

// TestSystemdUnit: the unit has the hardening and the wiring the relay
// needs (state directory as the data folder, the admin password as a
// credential), and systemd-analyze verifies it without a word, with the
// binary built as the image builds it in ExecStart's place.
func TestSystemdUnit(t *testing.T) {
	b, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	d := unitDirectives(t, text)
	for k, want := range map[string]string{
		"DynamicUser": "yes", "StateDirectory": "livesync-relay", "ProtectSystem": "strict", "ProtectHome": "yes",
		"PrivateTmp": "yes", "NoNewPrivileges": "yes", "CapabilityBoundingSet": "", "Restart": "on-failure",
		"SystemCallFilter": "@system-service",
	} {
		if !slices.Contains(d[k], want) {
			t.Errorf("%s=%v; want %s=%s", k, d[k], k, want)
		}
	}
	for _, k := range []string{"RestrictAddressFamilies", "LimitNOFILE", "LoadCredential", "ExecStart"} {
		if len(d[k]) == 0 {
			t.Errorf("no %s=", k)
		}
	}
	if !strings.Contains(text, "#AmbientCapabilities=CAP_NET_BIND_SERVICE") {
		t.Error("no commented AmbientCapabilities=CAP_NET_BIND_SERVICE for ports below 1024")
	}
	exec0 := strings.Join(d["ExecStart"], " ")
	if !strings.Contains(exec0, "--data-dir ${STATE_DIRECTORY}") || !strings.Contains(exec0, "--config ") {
		t.Errorf("ExecStart=%s: want --config FILE --data-dir ${STATE_DIRECTORY}", exec0)
	}
	// The password file the relay reads is the credential systemd loads.
	cred, _, _ := strings.Cut(strings.Join(d["LoadCredential"], ""), ":")
	if !slices.Contains(d["Environment"], "LIVESYNC_RELAY_ADMIN_PASSWORD_FILE=%d/"+cred) {
		t.Errorf("Environment=%v: want LIVESYNC_RELAY_ADMIN_PASSWORD_FILE=%%d/%s (the credential's path)", d["Environment"], cred)
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("systemd-analyze is not installed but CI is: .ci/run installs it (Debian's systemd package) so that the unit is verified")
		}
		t.Skip("systemd-analyze is not installed: the unit's directives were checked, not verified by systemd")
	}
	bin := relayBinary(t)
	fields := strings.Fields(exec0)
	unit := filepath.Join(t.TempDir(), "livesync-relay.service")
	os.WriteFile(unit, []byte(strings.ReplaceAll(text, fields[0], bin)), 0o644)
	out, err := exec.Command(analyze, "verify", "--man=no", unit).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	// The exposure score systemd rates the sandbox with (0 best, 10 worst).
	out, err = exec.Command(analyze, "security", "--offline=yes", "--no-pager", unit).CombinedOutput()
	m := regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`).FindSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	score, _ := strconv.ParseFloat(string(m[1]), 64)
	t.Logf("systemd-analyze security: exposure %.1f", score)
	if score > 2.5 {
		t.Errorf("exposure level %.1f; the unit's hardening kept it at 1.6", score)
	}
}
