package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/livesync-go/livesync-go/adapters/minio"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/docid"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/store"
)

// finding is one diagnosis of doctor.
type finding struct {
	Check   string   `json:"check"`
	Status  string   `json:"status"` // "ok", "warning", "problem", "skipped"
	Message string   `json:"message"`
	Details []string `json:"details,omitempty"`
	Advice  string   `json:"advice,omitempty"`
	// Commands are the livesync command lines the advice names, as
	// argument lists without the program name, ready to run.
	Commands [][]string `json:"commands,omitempty"`
	code     int        // the exit code of a problem
}

// Finding states.
const (
	statusOK      = "ok"
	statusWarning = "warning"
	statusProblem = "problem"
	statusSkipped = "skipped"
)

// doctor examines a remote without writing to it (no handshake, no
// milestone update): what LiveSync's handshake would refuse and why, in
// the order the plugin checks, then the data itself.
type doctor struct {
	env      *cliEnv
	spec     remoteSpec
	flags    commonFlags
	cc       couchConn     // a CouchDB remote
	bucket   *minio.Bucket // a journal bucket
	rep      *replica      // nil without a local replica
	findings []finding
}

func (d *doctor) add(f finding) { d.findings = append(d.findings, f) }

func (d *doctor) ok(check, msg string) {
	d.add(finding{Check: check, Status: statusOK, Message: msg})
}

func (d *doctor) problem(check string, code int, msg, advice string) {
	d.add(finding{Check: check, Status: statusProblem, Message: msg, Advice: advice, code: code})
}

func (d *doctor) warn(check, msg, advice string) {
	d.add(finding{Check: check, Status: statusWarning, Message: msg, Advice: advice})
}

func runDoctor(env *cliEnv, args []string) error {
	fs := newFlagSet(env, "doctor", "doctor [REMOTE] [flags]")
	var cf commonFlags
	addCommonFlags(fs, &cf)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	env.json = cf.json
	if len(pos) > 1 {
		return usageError{"doctor takes at most one remote"}
	}
	cfg, err := env.loadConfig(cf.config)
	if err != nil {
		return err
	}
	spec, err := resolveRemote(cfg, first(pos))
	if err != nil {
		return err
	}
	d := &doctor{env: env, spec: spec, flags: cf}
	if spec.kind == "s3" {
		if d.bucket, err = env.openBucket(spec, cf); err != nil {
			return err
		}
	} else {
		if d.cc, err = env.openCouch(spec, cf); err != nil {
			return err
		}
		defer d.cc.db.Close()
	}
	if path := storePath(cf.store, cfg); fileExists(path) {
		if d.rep, err = env.openReplica(path, false); err != nil {
			return err
		}
		defer d.rep.Close()
	}
	d.run(env.ctx)
	if err := env.ctx.Err(); err != nil {
		return err
	}
	return d.report()
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// run runs the checks; a check whose failure makes the next ones
// meaningless ends the run.
func (d *doctor) run(ctx context.Context) {
	if d.bucket != nil {
		d.runBucket(ctx)
		return
	}
	if !d.checkServer(ctx) || !d.checkDatabase(ctx) {
		return
	}
	d.checkVersion(ctx)
	salt, ok := d.checkSyncParameters(ctx)
	if !ok {
		return
	}
	settings, ok := d.checkMilestone(ctx)
	if !ok {
		return
	}
	codec := d.checkPassphrase(ctx, settings, salt)
	d.checkChunks(ctx, codec)
	d.checkServerConfig(ctx)
}

// get sends an authenticated GET to the server and decodes a JSON
// answer; it returns the HTTP status (0 for a transport failure).
func (d *doctor) get(ctx context.Context, path string, out any) (int, error) {
	u := *d.cc.server
	u.Path = strings.TrimRight(u.Path, "/") + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "application/json")
	if d.cc.user != "" || d.cc.password != "" {
		req.SetBasicAuth(d.cc.user, d.cc.password)
	}
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return 0, &engine.Error{Op: "GET " + path, Stage: engine.StageTransport, Err: redactURLError(err)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, &engine.Error{Op: "GET " + path, Stage: engine.StageTransport, Err: err}
	}
	if resp.StatusCode/100 == 2 && out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("GET %s: not JSON: %w", path, err)
		}
	}
	return resp.StatusCode, nil
}

func (d *doctor) checkServer(ctx context.Context) bool {
	var welcome struct {
		CouchDB string `json:"couchdb"`
		Version string `json:"version"`
		Vendor  struct {
			Name string `json:"name"`
		} `json:"vendor"`
	}
	status, err := d.get(ctx, "/", &welcome)
	switch {
	case err != nil && status == 0:
		var ee *engine.Error
		cause := err.Error()
		if errors.As(err, &ee) {
			cause = transportCause(ee)
		}
		d.problem("server", exitUnreachable, "cannot reach "+d.cc.server.String()+": "+cause,
			"check the URL (scheme, host and port), that the server is running, and that this machine can reach it")
		return false
	case status >= 500:
		d.problem("server", exitUnreachable, fmt.Sprintf("the server answers HTTP %d", status), "look at the server's log; try again later")
		return false
	}
	name := welcome.Vendor.Name
	if name == "" {
		name = "a CouchDB-compatible server"
	}
	if welcome.Version != "" {
		name += " " + welcome.Version
	}
	d.ok("server", "reachable: "+name)
	return true
}

func (d *doctor) checkDatabase(ctx context.Context) bool {
	var info struct {
		DocCount int64 `json:"doc_count"`
	}
	status, err := d.get(ctx, "/"+d.cc.db.Name(), &info)
	switch {
	case err != nil && status == 0:
		d.problem("database", exitUnreachable, err.Error(), "try again")
		return false
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		who := "anonymous requests are"
		if d.cc.user != "" {
			who = fmt.Sprintf("the user %q is", d.cc.user)
		}
		d.problem("login", exitAuth, fmt.Sprintf("%s refused (HTTP %d)", who, status),
			"check the user name and password ($LIVESYNC_PASSWORD, --password-file), and that the user may read and write the database (its _security members)")
		return false
	case status == http.StatusNotFound:
		push := d.command("push")
		d.add(finding{Check: "database", Status: statusProblem, code: exitRefused, Commands: [][]string{push},
			Message: fmt.Sprintf("the database %q does not exist", d.cc.db.Name()),
			Advice:  fmt.Sprintf("check its name; a push creates it with the vault: %s (or livesync import DIR with the remote)", commandLine(push))})
		return false
	case status/100 != 2:
		d.problem("database", exitFailed, fmt.Sprintf("reading the database answers HTTP %d", status), "look at the server's log")
		return false
	}
	if d.cc.user != "" {
		d.ok("login", fmt.Sprintf("the user %q is accepted", d.cc.user))
	}
	d.ok("database", fmt.Sprintf("%q exists (%d documents)", d.cc.db.Name(), info.DocCount))
	return true
}

func (d *doctor) checkVersion(ctx context.Context) {
	var raw json.RawMessage
	status, err := d.get(ctx, "/"+d.cc.db.Name()+"/"+negotiate.VersionDocID, &raw)
	if err != nil {
		d.warn("version", "the version document could not be read: "+err.Error(), "")
		return
	}
	if status == http.StatusNotFound {
		d.ok("version", "no version document yet (the first sync writes it)")
		return
	}
	v, err := negotiate.ParseVersionDoc(raw)
	if err == nil {
		_, err = negotiate.CheckVersion(&v)
	}
	if err != nil {
		d.problem("version", exitRefused, "the database was written by a newer or different client ("+err.Error()+")",
			"update livesync-go and every device to the newest version")
		return
	}
	d.ok("version", fmt.Sprintf("database format %v", v.Version))
}

func (d *doctor) checkSyncParameters(ctx context.Context) ([]byte, bool) {
	raw, err := d.cc.db.GetLocal(ctx, strings.TrimPrefix(negotiate.SyncParametersDocID, "_local/"))
	switch {
	case errors.Is(err, engine.ErrNotFound):
		d.ok("salt", "no sync parameters yet: the vault is new, and the first sync creates its salt")
		return nil, true
	case err != nil:
		code, msg := classify(err)
		d.problem("salt", code, "the sync parameters could not be read: "+msg, "")
		return nil, false
	}
	p, err := negotiate.ParseSyncParameters(raw)
	if err != nil {
		d.problem("salt", exitRefused, "the sync parameters document is damaged: "+err.Error(),
			"restore it from a backup of the database; a new salt would make the vault's data unreadable")
		return nil, false
	}
	salt, err := p.Salt()
	if errors.Is(err, negotiate.ErrNoSalt) {
		d.ok("salt", "the sync parameters have no salt yet: the first sync creates it")
		return nil, true
	}
	if err != nil {
		d.problem("salt", exitRefused, "the sync parameters hold an unreadable salt: "+err.Error(),
			"restore the document from a backup of the database")
		return nil, false
	}
	d.ok("salt", "the vault's salt is there")
	return salt, true
}

// joinAdvice is what to run on a remote locked for this device: an
// empty (or no) replica joins as it pulls; one that holds documents
// must discard them first (--rebuild-local), or the lock be cleared.
func (d *doctor) joinAdvice(ctx context.Context) (string, [][]string) {
	empty := d.rep == nil
	if !empty {
		var err error
		if empty, err = d.rep.isEmpty(ctx); err != nil {
			empty = false
		}
	}
	pull := d.command("pull")
	if !empty {
		pull = d.command("pull", "--rebuild-local")
	}
	unlock := d.command("unlock")
	commands := [][]string{pull, unlock}
	if empty {
		return fmt.Sprintf("fetch it: %s (an empty replica joins the accepted devices as it pulls); or clear the lock: %s",
			commandLine(pull), commandLine(unlock)), commands
	}
	return fmt.Sprintf("discard this replica's documents and fetch everything again: %s; or, if this replica's data should win, clear the lock (%s) and push",
		commandLine(pull), commandLine(unlock)), commands
}

// command is a livesync command on this doctor's remote, with the
// --config and --store it was given, as arguments.
func (d *doctor) command(name string, args ...string) []string {
	return d.commandStore(name, d.flags.store, args...)
}

// commandStore is command with the local replica store ("" for none).
func (d *doctor) commandStore(name, store string, args ...string) []string {
	out := append([]string{name, d.spec.commandArg()}, args...)
	if d.flags.config != "" {
		out = append(out, "--config", d.flags.config)
	}
	if store != "" {
		out = append(out, "--store", store)
	}
	return out
}

// freshStore is a path for a new local replica beside this one.
func (d *doctor) freshStore() string {
	path := defaultStore
	if d.rep != nil {
		path = d.rep.path
	}
	dir, base := filepath.Split(path)
	name := strings.TrimSuffix(base, filepath.Ext(base))
	for i := 1; ; i++ {
		p := filepath.Join(dir, fmt.Sprintf("%s-fresh%d%s", name, i, filepath.Ext(base)))
		if !fileExists(p) {
			return p
		}
	}
}

// commandLine is args as a shell command line.
func commandLine(args []string) string {
	q := []string{"livesync"}
	for _, a := range args {
		q = append(q, shellQuote(a))
	}
	return strings.Join(q, " ")
}

// checkMilestone judges the milestone as the handshake would for this
// replica's node (a new device's without a replica), without writing it.
func (d *doctor) checkMilestone(ctx context.Context) (livesync.Settings, bool) {
	raw, err := d.cc.db.GetLocal(ctx, strings.TrimPrefix(negotiate.MilestoneDocID, "_local/"))
	return d.judgeMilestone(ctx, raw, err, negotiate.CouchDBChunkRange)
}

// judgeMilestone judges a milestone read as raw (err: the read's error;
// not found: none yet) for a client announcing chunkRange.
func (d *doctor) judgeMilestone(ctx context.Context, raw []byte, err error, chunkRange negotiate.ChunkRange) (livesync.Settings, bool) {
	var m *negotiate.Milestone
	switch {
	case errors.Is(err, engine.ErrNotFound):
	case err != nil:
		code, msg := classify(err)
		d.problem("milestone", code, "the milestone could not be read: "+msg, "")
		return livesync.Settings{}, false
	default:
		if m, err = negotiate.ParseMilestone(raw); err != nil {
			d.problem("milestone", exitRefused, "the milestone document is damaged: "+err.Error(),
				"rebuild the remote from a device that has the whole vault (the plugin's \"Rebuild everything\")")
			return livesync.Settings{}, false
		}
	}
	pref, hasPref := negotiate.TweakValues{}, false
	if m != nil {
		pref, hasPref = m.TweakValues[negotiate.PreferredNode]
	}
	node, current := "", pref
	var local *vaultRecord
	if d.rep != nil {
		local = d.rep.vault
		if node, err = d.rep.nodeIDIfAny(ctx); err != nil {
			d.warn("milestone", "the local replica's node id cannot be read: "+err.Error(), "")
		}
	}
	if local != nil {
		current = local.Tweaks
	} else if !hasPref {
		c := vaultConfig{}
		if d.bucket != nil {
			size := journalChunkSize
			c.CustomChunkSize = &size
		}
		current = newVaultSettings(c).TweakValues()
	}
	// The remote's data is written with its preferred settings; this
	// device's are compared with them below.
	remoteTweaks := current
	if hasPref {
		remoteTweaks = pref
	}
	s, err := settingsOf(remoteTweaks)
	if err != nil {
		d.problem("settings", exitRefused, err.Error(), "")
		return s, false
	}
	if m == nil {
		d.ok("milestone", "no milestone yet: the vault is new (the first sync writes it with this device's settings)")
		return s, true
	}
	v := negotiate.Check(m, node, chunkRange, current, negotiate.CheckOptions{})
	switch v.Kind {
	case negotiate.VerdictOK:
		d.ok("milestone", "the remote accepts this device: "+describeSettings(s))
	case negotiate.VerdictLocked:
		d.ok("milestone", "the remote is locked, and this device is among its accepted devices")
	case negotiate.VerdictNodeLocked, negotiate.VerdictNodeCleaned:
		what := "locked: another device rebuilt it"
		if v.Kind == negotiate.VerdictNodeCleaned {
			what = "cleaned up by another device"
		}
		who := "this device is not"
		if node == "" {
			who = "a new device is not"
		}
		advice, commands := d.joinAdvice(ctx)
		d.add(finding{Check: "milestone", Status: statusProblem, code: exitRefused, Advice: advice, Commands: commands,
			Message: fmt.Sprintf("the remote was %s, and %s among its accepted devices (%s)", what, who, strings.Join(acceptedDevices(m), ", "))})
	case negotiate.VerdictIncompatible:
		d.problem("milestone", exitRefused, "the chunk formats of the vault's devices do not overlap with this one's",
			"update every device to the newest version")
	case negotiate.VerdictMismatched:
		var diffs []string
		for _, df := range v.Diffs {
			diffs = append(diffs, fmt.Sprintf("%s: the remote prefers %s, this replica has %s (%s)", df.Key, df.Preferred, df.Current, impactWords(df.Impact)))
		}
		fresh := d.commandStore("pull", d.freshStore())
		rebuild := d.command("push", "--rebuild")
		d.add(finding{Check: "settings", Status: statusProblem, code: exitRefused, Message: "the local replica's settings differ from the remote's preferred ones:", Details: diffs,
			Commands: [][]string{fresh, rebuild},
			Advice: fmt.Sprintf("use a fresh local replica, which adopts the remote's settings: %s; or, if this replica's settings are the right ones and it holds the whole vault, rebuild the remote with them: %s (every other device must then fetch it again)",
				commandLine(fresh), commandLine(rebuild))})
	}
	// A refused device can still have the data checked.
	return s, true
}

func impactWords(i negotiate.Impact) string {
	switch i {
	case negotiate.ImpactBreaking:
		return "changing it needs a rebuild"
	case negotiate.ImpactLossy:
		return "compatible, but some data would be re-encoded"
	}
	return i.String()
}

// describeSettings says what a vault's settings are, in words.
func describeSettings(s livesync.Settings) string {
	return fmt.Sprintf("%s, chunk size %d", describeFlags(s.Encrypt, s.PathObfuscation), s.CustomChunkSize)
}

// checkPassphrase decrypts a few of the remote's documents; on failure it
// tells a wrong passphrase from a changed salt when the local replica
// holds chunks the remote has too (chunk ids depend on the passphrase,
// not on the salt). It returns a codec for the data checks, or nil.
func (d *doctor) checkPassphrase(ctx context.Context, s livesync.Settings, salt []byte) *livesync.Codec {
	if !needsPassphrase(s) {
		codec, err := livesync.New(livesync.Config{Settings: s, Salt: salt})
		if err != nil {
			d.problem("passphrase", exitFailed, err.Error(), "")
			return nil
		}
		d.ok("passphrase", "not needed: the vault is not encrypted")
		return codec
	}
	pass, err := d.env.passphraseFor(&d.spec, d.flags)
	if err != nil {
		d.add(finding{Check: "passphrase", Status: statusSkipped, Message: "the vault is encrypted and no passphrase was given, so its data was not checked",
			Advice: "set LIVESYNC_PASSPHRASE or use --passphrase-file to check it"})
		return nil
	}
	s.Passphrase = pass
	if salt == nil {
		d.ok("passphrase", "nothing to check yet: the vault has no salt")
		return nil
	}
	codec, err := livesync.New(livesync.Config{Settings: s, Salt: salt})
	if err != nil {
		d.problem("passphrase", exitFailed, err.Error(), "")
		return nil
	}
	c := &couchRemote{id: d.spec.String(), db: d.cc.db, codec: codec}
	err = c.checkPassphrase(ctx)
	if err == nil {
		d.ok("passphrase", "the remote's data decrypts with this passphrase")
		return codec
	}
	if !errors.Is(err, engine.ErrDecrypt) {
		code, msg := classify(err)
		d.problem("passphrase", code, msg, "")
		return nil
	}
	if d.rep != nil && d.sharesChunks(ctx) {
		d.problem("passphrase", exitPassphrase,
			"the passphrase is right (the remote holds chunks whose ids it gives), but the remote's documents do not decrypt with its current salt: its sync parameters were reset after the data was written",
			"restore _local/obsidian_livesync_sync_parameters from a backup of the database, or rebuild the remote from a device that has the whole vault")
		return nil
	}
	d.problem("passphrase", exitPassphrase, "the remote's documents do not decrypt: the passphrase is wrong, or the remote's salt was reset after its data was written",
		"check the passphrase ($LIVESYNC_PASSPHRASE, --passphrase-file, the passphrase_file of the configuration); if it is right, the remote must be rebuilt from a device that has the whole vault")
	return nil
}

// sharesChunks reports whether a few of the replica's E2EE chunk ids
// exist on the remote.
func (d *doctor) sharesChunks(ctx context.Context) bool {
	infos, err := d.rep.st.AllDocs(ctx, store.AllDocsOptions{StartKey: docid.PrefixChunk + "+", EndKey: docid.PrefixChunk + "+\uffff", Limit: 20})
	if err != nil || len(infos) == 0 {
		return false
	}
	ids, err := d.remoteChunkIDs(ctx)
	if err != nil {
		return false
	}
	for _, in := range infos {
		if ids[in.ID] {
			return true
		}
	}
	return false
}

// remoteChunkIDs lists the ids of the remote's chunks (not deleted) from
// its changes feed.
func (d *doctor) remoteChunkIDs(ctx context.Context) (map[string]bool, error) {
	ids := map[string]bool{}
	since := ""
	for {
		page, err := d.cc.db.Changes(ctx, engine.ChangesRequest{Since: since, Limit: 1000})
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
func (d *doctor) checkChunks(ctx context.Context, codec *livesync.Codec) {
	if codec == nil {
		d.add(finding{Check: "chunks", Status: statusSkipped, Message: "not checked: the vault's documents cannot be read"})
		return
	}
	c := &couchRemote{id: d.spec.String(), db: d.cc.db, codec: codec}
	metas, err := c.Files(ctx)
	if err != nil {
		code, msg := classify(err)
		d.problem("chunks", code, "the file list could not be read: "+msg, "")
		return
	}
	have, err := d.remoteChunkIDs(ctx)
	if err != nil {
		code, msg := classify(err)
		d.problem("chunks", code, "the chunk list could not be read: "+msg, "")
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
		d.ok("chunks", fmt.Sprintf("every chunk of the %d %s is on the remote", live, plural(live, "file", "files")))
		return
	}
	sort.Strings(paths)
	shown := paths
	if len(shown) > 10 {
		shown = append(shown[:10:10], fmt.Sprintf("and %d more", len(paths)-10))
	}
	d.add(finding{Check: "chunks", Status: statusProblem, code: exitFailed, Details: shown,
		Message: fmt.Sprintf("%d of %d files refer to %d %s the remote does not have:", files, live, len(missing), plural(len(missing), "chunk", "chunks")),
		Advice:  "push from a device (or a local replica) that holds those files completely; other devices hold such files back until the chunks arrive"})
}

// serverNeeds is what LiveSync needs of a CouchDB server's configuration
// (FORMAT.md §5.1, the plugin's utils/couchdb/provision.ts): section,
// key, the value, and whether a larger number is fine.
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
// plugin needs. Reading it needs an admin; only warnings come of it: the
// CLI itself needs neither CORS nor a login requirement.
func (d *doctor) checkServerConfig(ctx context.Context) {
	var cfg map[string]map[string]string
	status, err := d.get(ctx, "/_node/_local/_config", &cfg)
	if err == nil && status == http.StatusNotFound {
		status, err = d.get(ctx, "/_config", &cfg) // CouchDB 1.x, PouchDB Server
	}
	switch {
	case err != nil:
		d.warn("server settings", "the server's configuration could not be read: "+err.Error(), "")
		return
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		d.add(finding{Check: "server settings", Status: statusSkipped,
			Message: "the server's configuration can only be read by an admin",
			Advice:  "as an admin, check chttpd/max_http_request_size (4294967296), couchdb/max_document_size (50000000), CORS for app://obsidian.md, and require_valid_user"})
		return
	case status/100 != 2:
		d.warn("server settings", fmt.Sprintf("the server's configuration answers HTTP %d", status), "")
		return
	}
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
	if len(wrong) == 0 {
		d.ok("server settings", "the server is configured as LiveSync needs")
		return
	}
	d.add(finding{Check: "server settings", Status: statusWarning, Message: "the plugin may fail against this server:", Details: wrong,
		Advice: "set them as an admin (PUT /_node/_local/_config/SECTION/KEY with the value as a JSON string), as the plugin's setup does"})
}

// report prints the findings and returns the error of the first problem.
func (d *doctor) report() error {
	problems := 0
	var firstCode int
	for _, f := range d.findings {
		if f.Status == statusProblem {
			if problems == 0 {
				firstCode = f.code
			}
			problems++
		}
	}
	if d.env.json {
		writeJSON(d.env.stdout, map[string]any{"ok": problems == 0, "command": "doctor", "remote": d.spec.String(), "findings": d.findings})
	} else {
		fmt.Fprintf(d.env.stdout, "checking %s\n", safe(d.spec.String()))
		for _, f := range d.findings {
			label := map[string]string{statusOK: "ok", statusWarning: "WARNING", statusProblem: "PROBLEM", statusSkipped: "skipped"}[f.Status]
			fmt.Fprintf(d.env.stdout, "  %-8s %-16s %s\n", label, safe(f.Check), safe(f.Message))
			for _, det := range f.Details {
				fmt.Fprintf(d.env.stdout, "  %-8s %-16s   %s\n", "", "", safe(det))
			}
			if f.Advice != "" {
				fmt.Fprintf(d.env.stdout, "  %-8s %-16s -> %s\n", "", "", safe(f.Advice))
			}
		}
	}
	if problems == 0 {
		return nil
	}
	return &doctorError{code: firstCode, problems: problems}
}

// doctorError ends doctor with the exit code of its first problem.
type doctorError struct{ code, problems int }

func (e *doctorError) Error() string {
	return fmt.Sprintf("%d %s found (see above)", e.problems, plural(e.problems, "problem", "problems"))
}
