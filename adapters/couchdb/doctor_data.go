package couchdb

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/docid"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// ChunkIDs lists the ids of the database's chunks (not deleted) from its
// changes feed.
func (d *DB) ChunkIDs(ctx context.Context) (map[string]bool, error) {
	ids := map[string]bool{}
	since := ""
	for {
		page, err := d.Changes(ctx, engine.ChangesRequest{Since: since, Limit: 1000})
		if err != nil {
			return nil, err
		}
		for _, c := range page.Results {
			if docid.IsChunkID(c.ID) && !c.Deleted {
				ids[c.ID] = true
			}
		}
		if len(page.Results) == 0 || page.Pending == 0 || page.LastSeq == since {
			return ids, nil
		}
		since = page.LastSeq
	}
}

// checkChunks counts the files whose chunks the remote lacks.
func (c *couchDoctor) checkChunks(ctx context.Context, codec *livesync.Codec) {
	f := c.f
	if codec == nil {
		f.Skipped("chunks", "not checked: the vault's documents cannot be read", "")
		return
	}
	metas, err := vault.EndpointFiles(ctx, c.db, codec)
	if err != nil {
		code, msg := f.Explain(err)
		f.Problem("chunks", code, "the file list could not be read: "+msg, "")
		return
	}
	have, err := c.db.ChunkIDs(ctx)
	if err != nil {
		code, msg := f.Explain(err)
		f.Problem("chunks", code, "the chunk list could not be read: "+msg, "")
		return
	}
	files, missing := 0, map[string]bool{}
	var paths []string
	live := 0
	for _, m := range metas {
		if m.Deleted {
			continue
		}
		live++
		lacks := false
		for _, id := range m.Children {
			if _, eden := m.Eden[id]; !have[id] && !eden {
				missing[id] = true
				lacks = true
			}
		}
		if lacks {
			files++
			paths = append(paths, m.Path)
		}
	}
	if files == 0 {
		f.OK("chunks", fmt.Sprintf("every chunk of the %d %s is on the remote", live, plural(live, "file", "files")))
		return
	}
	sort.Strings(paths)
	shown := paths
	if len(shown) > 10 {
		shown = append(shown[:10:10], fmt.Sprintf("and %d more", len(paths)-10))
	}
	f.Add(vault.Finding{Check: "chunks", Status: vault.FindingProblem, Code: f.O.Codes.Failed, Details: shown,
		Message: fmt.Sprintf("%d of %d files refer to %d %s the remote does not have:", files, live, len(missing), plural(len(missing), "chunk", "chunks")),
		Advice:  "push from a device (or a local replica) that holds those files completely; other devices hold such files back until the chunks arrive"})
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// serverNeeds is what LiveSync needs of a CouchDB server's configuration
// (the plugin's utils/couchdb/provision.ts): section, key, the value, and
// whether a larger number is fine.
var serverNeeds = []struct {
	section, key, want string
	atLeast            bool
}{
	{"chttpd", "require_valid_user", "true", false},
	{"chttpd_auth", "require_valid_user", "true", false},
	{"httpd", "enable_cors", "true", false},
	{"chttpd", "enable_cors", "true", false},
	{"chttpd", "max_http_request_size", "4294967296", true},
	{"couchdb", "max_document_size", "50000000", true},
	{"cors", "credentials", "true", false},
}

// checkServerConfig compares the server's configuration with what the
// plugin needs. Reading it needs an admin; only warnings come of it: a
// client without a browser needs neither CORS nor a login requirement.
func (c *couchDoctor) checkServerConfig(ctx context.Context) {
	var cfg map[string]map[string]string
	status, err := c.get(ctx, "/_node/_local/_config", &cfg)
	if err == nil && status == http.StatusNotFound {
		status, err = c.get(ctx, "/_config", &cfg) // CouchDB 1.x, PouchDB Server
	}
	switch {
	case err != nil:
		c.f.Warn("server settings", "the server's configuration could not be read: "+err.Error(), "")
		return
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		c.f.Skipped("server settings", "the server's configuration can only be read by an admin",
			"as an admin, check chttpd/max_http_request_size (4294967296), couchdb/max_document_size (50000000), CORS for app://obsidian.md, and require_valid_user")
		return
	case status/100 != 2:
		c.f.Warn("server settings", fmt.Sprintf("the server's configuration answers HTTP %d", status), "")
		return
	}
	if wrong := configProblems(cfg); len(wrong) > 0 {
		c.f.Add(vault.Finding{Check: "server settings", Status: vault.FindingWarning, Message: "the plugin may fail against this server:", Details: wrong,
			Advice: "set them as an admin (PUT /_node/_local/_config/SECTION/KEY with the value as a JSON string), as the plugin's setup does"})
		return
	}
	c.f.OK("server settings", "the server is configured as LiveSync needs")
}

// configProblems lists what differs in a server's configuration from
// what the plugin needs.
func configProblems(cfg map[string]map[string]string) []string {
	var wrong []string
	for _, n := range serverNeeds {
		got, ok := cfg[n.section][n.key]
		if ok && got == n.want {
			continue
		}
		if n.atLeast && ok {
			g, err1 := strconv.ParseInt(strings.Trim(got, `"`), 10, 64)
			w, _ := strconv.ParseInt(n.want, 10, 64)
			if err1 == nil && g >= w {
				continue
			}
		}
		is := "unset"
		if ok {
			is = strconv.Quote(got)
		}
		wrong = append(wrong, fmt.Sprintf("%s/%s is %s, LiveSync needs %q", n.section, n.key, is, n.want))
	}
	origins := cfg["cors"]["origins"]
	if origins != "*" && !strings.Contains(origins, "app://obsidian.md") {
		wrong = append(wrong, fmt.Sprintf("cors/origins is %q, the Obsidian app needs app://obsidian.md,capacitor://localhost,http://localhost", origins))
	}
	return wrong
}
