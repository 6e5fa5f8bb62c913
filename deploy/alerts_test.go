package deploy_test

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v3"
)

// alertFile is the Prometheus rule file's format, decoded strictly.
type alertFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// promGenerated are series Prometheus records itself, not the relay.
var promGenerated = []string{"up"}

var (
	promString   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promBraces   = regexp.MustCompile(`\{[^}]*\}`)
	promRange    = regexp.MustCompile(`\[[^\]]*\]`)
	promLabelArg = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promIdent    = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	promKeywords = []string{"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left", "group_right"}
	// promSelector is a metric with its matchers; promEq one equality
	// matcher in it.
	promSelector = regexp.MustCompile(`([A-Za-z_:][A-Za-z0-9_:]*)\{([^}]*)\}`)
	promEq       = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"([^"]*)"`)
)

// metricNames returns the metric names a PromQL expression selects: its
// identifiers less label lists, matchers, ranges, functions and keywords.
func metricNames(expr string) []string {
	e := promString.ReplaceAllString(expr, `""`)
	e = promBraces.ReplaceAllString(e, " ")
	e = promRange.ReplaceAllString(e, " ")
	e = promLabelArg.ReplaceAllString(e, " ")
	var names []string
	for _, loc := range promIdent.FindAllStringIndex(e, -1) {
		name := e[loc[0]:loc[1]]
		if strings.HasPrefix(strings.TrimSpace(e[loc[1]:]), "(") || slices.Contains(promKeywords, name) {
			continue // a function or an aggregation
		}
		if loc[0] > 0 && (e[loc[0]-1] >= '0' && e[loc[0]-1] <= '9' || e[loc[0]-1] == '.') {
			continue // a number's exponent or unit
		}
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names
}

func readAlerts(t *testing.T) alertFile {
	t.Helper()
	b, err := os.ReadFile("prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var f alertFile
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	return f
}

// TestAlertRulesFormat: the rule file has Prometheus's structure, every
// rule a unique name, a severity, a summary, a valid "for" and balanced
// brackets, and covers what an operator must hear about.
func TestAlertRulesFormat(t *testing.T) {
	f := readAlerts(t)
	if len(f.Groups) == 0 {
		t.Fatal("no groups")
	}
	seen := map[string]bool{}
	var exprs []string
	for _, g := range f.Groups {
		if g.Name == "" || len(g.Rules) == 0 {
			t.Errorf("group %q: want a name and rules", g.Name)
		}
		for _, r := range g.Rules {
			if r.Alert == "" || seen[r.Alert] {
				t.Errorf("alert %q: empty or given twice", r.Alert)
			}
			seen[r.Alert] = true
			if !slices.Contains([]string{"warning", "critical"}, r.Labels["severity"]) || r.Annotations["summary"] == "" {
				t.Errorf("%s: severity %q, summary %q", r.Alert, r.Labels["severity"], r.Annotations["summary"])
			}
			if r.For != "" {
				if _, err := time.ParseDuration(r.For); err != nil {
					t.Errorf("%s: for %q: %v", r.Alert, r.For, err)
				}
			}
			e := promString.ReplaceAllString(r.Expr, `""`)
			for _, p := range []string{"()", "{}", "[]"} {
				if strings.Count(e, p[:1]) != strings.Count(e, p[1:]) {
					t.Errorf("%s: unbalanced %s in %s", r.Alert, p, r.Expr)
				}
			}
			exprs = append(exprs, r.Expr)
		}
	}
	all := strings.Join(exprs, "\n")
	for what, want := range map[string]string{
		"relay down": `up{job="livesync-relay"} == 0`, "upstream down": "livesync_relay_upstream_up",
		"held rising": "deriv(livesync_relay_held_documents", "hunt failures": `outcome="failed"`,
		"5xx rate": `code=~"5.."`, "disk": "livesync_relay_data_dir_available_bytes", "fds": "process_open_fds",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no rule for %s (%s)", what, want)
		}
	}
}

// TestAlertRulesMetricsExported starts a relay with an upstream (whose
// server is down: its metrics are there all the same) and checks that
// every metric the rules select, and every label value they match
// exactly, is in its /metrics: renaming a metric breaks this test.
func TestAlertRulesMetricsExported(t *testing.T) {
	f := readAlerts(t)
	down := freeAddr(t)
	p := startRelay(t, fmt.Sprintf(`listen = %q
data_dir = %q
metrics_public = true

[[databases]]
name = "vault"

[[databases.upstreams]]
name = "home-couch"
kind = "couchdb"
url = "http://%s"
database = "vault"
user = "admin"
password_env = "TEST_UPSTREAM_PASSWORD"
`, freeAddr(t), t.TempDir(), down), []string{"LIVESYNC_RELAY_ADMIN_PASSWORD=deploy-test-admin", "TEST_UPSTREAM_PASSWORD=x"})
	exposition := p.get(t, "/metrics")
	samples := map[string][]string{} // metric name: its sample lines
	for _, line := range strings.Split(exposition, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name := promIdent.FindString(line)
		samples[name] = append(samples[name], line)
	}
	checked := 0
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			for _, name := range metricNames(r.Expr) {
				if slices.Contains(promGenerated, name) {
					continue
				}
				checked++
				if len(samples[name]) == 0 {
					t.Errorf("%s: the relay exports no %s", r.Alert, name)
				}
			}
			for _, sel := range promSelector.FindAllStringSubmatch(r.Expr, -1) {
				if slices.Contains(promGenerated, sel[1]) {
					continue
				}
				for _, eq := range promEq.FindAllStringSubmatch(sel[2], -1) {
					if eq[1] == "job" {
						continue // set by the scrape configuration
					}
					want := fmt.Sprintf(`%s="%s"`, eq[1], eq[2])
					if !slices.ContainsFunc(samples[sel[1]], func(s string) bool { return strings.Contains(s, want) }) {
						t.Errorf("%s: no %s{%s} in the relay's metrics", r.Alert, sel[1], want)
					}
				}
			}
		}
	}
	if checked < 10 {
		t.Errorf("only %d metric references found in the rules: is the extraction broken?", checked)
	}
}

// TestMetricNamesExtraction pins the PromQL reading the test above
// relies on.
func TestMetricNamesExtraction(t *testing.T) {
	got := metricNames(`sum by (instance, db) (rate(a_total{code=~"5..", x="y"}[5m])) / on (instance) b > 0.5e3
and predict_linear(c[6h], 24 * 3600) < 0 unless d{state="stopped"} == 1`)
	if want := []string{"a_total", "b", "c", "d"}; !slices.Equal(got, want) {
		t.Fatalf("metricNames: %v, want %v", got, want)
	}
}
