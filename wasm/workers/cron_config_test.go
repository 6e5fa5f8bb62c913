//go:build !js

package main

import (
	"strings"
	"testing"
	"time"
)

func TestParseCron(t *testing.T) {
	c, err := parseCron(envOf(map[string]string{
		"LIVESYNC_UPSTREAMS": `[{"db":"vault","url":"https://couch.example/vault","user":"u","password":"p"},
			{"db":"vault","name":"second","url":"http://other:5984/v2","mode":"source"},
			{"db":"notes","url":"https://couch.example/notes","chunks_online":true}]`,
		"LIVESYNC_CRON_BUDGET": "40", "LIVESYNC_HUNT_MAX_PER_WINDOW": "10",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.dbs(); strings.Join(got, ",") != "notes,vault" {
		t.Fatalf("databases %v", got)
	}
	v := c.upstreams["vault"]
	if len(v) != 2 || v[0].Name != "upstream-1" || v[0].Mode != "sync" || v[1].Name != "second" || v[1].Mode != "source" {
		t.Fatalf("vault's upstreams: %+v", v)
	}
	if c.budget != 40*time.Second || c.huntPerWindow != 10 || c.queries != defaultCronQueries {
		t.Fatalf("settings: %+v", c)
	}
	if c, err := parseCron(envOf(nil)); err != nil || len(c.upstreams) != 0 || c.budget != defaultCronBudget {
		t.Fatalf("no settings: %+v, %v", c, err)
	}
}

func TestParseCronErrors(t *testing.T) {
	const secret = "hunter2-secret"
	for _, tc := range []struct{ name, v, want string }{
		{"LIVESYNC_UPSTREAMS", `{"db":"vault"}`, "JSON list"},
		{"LIVESYNC_UPSTREAMS", `[{"db":"vault","url":"https://x/v","password":"` + secret + `"`, "JSON list"},
		{"LIVESYNC_UPSTREAMS", `[{"db":"Vault","url":"https://x/v"}]`, "not a valid database name"},
		{"LIVESYNC_UPSTREAMS", `[{"db":"vault","url":"ftp://x/v"}]`, "url"},
		{"LIVESYNC_UPSTREAMS", `[{"db":"vault","url":"https://u:` + secret + `@x/v"}]`, "not in the URL"},
		{"LIVESYNC_UPSTREAMS", `[{"db":"vault","url":"https://x/v","password":"` + secret + `"}]`, "needs a user"},
		{"LIVESYNC_UPSTREAMS", `[{"db":"vault","url":"https://x/v","mode":"both"}]`, "mode"},
		{"LIVESYNC_UPSTREAMS", `[{"db":"vault","url":"https://x/v","mode":"push","chunks_online":true}]`, "chunks_online"},
		{"LIVESYNC_UPSTREAMS", `[{"db":"vault","url":"https://x/v","passwrd":"x"}]`, "unknown field"},
		{"LIVESYNC_UPSTREAMS", `[{"db":"vault","url":"https://x/v"},{"db":"vault","url":"https://y/v","name":"upstream-1"}]`, "two upstreams"},
		{"LIVESYNC_CRON_BUDGET", "0", "LIVESYNC_CRON_BUDGET"},
		{"LIVESYNC_CRON_BUDGET", "901", "LIVESYNC_CRON_BUDGET"},
		{"LIVESYNC_CRON_MAX_QUERIES", "1001", "LIVESYNC_CRON_MAX_QUERIES"},
		{"LIVESYNC_CRON_MAX_QUERIES", "50", "LIVESYNC_CRON_MAX_QUERIES"},
		{"LIVESYNC_HUNT_MAX_IN_FLIGHT", "x", "LIVESYNC_HUNT_MAX_IN_FLIGHT"},
	} {
		_, err := parseCron(envOf(map[string]string{tc.name: tc.v}))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s=%s: %v, want an error with %q", tc.name, tc.v, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%s: the error shows the password: %v", tc.name, err)
		}
	}
}
