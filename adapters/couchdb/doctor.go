package couchdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/negotiate/doctor"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// Doctor examines the database without writing to it (no handshake, no
// milestone update): what LiveSync's handshake would refuse and why, in
// the order the plugin checks (the server, the login, the database, the
// version document, the salt, the milestone), then the data itself (the
// passphrase, the chunks the files need) and the server's configuration.
// A check whose failure makes the next ones meaningless ends the run.
func (d *DB) Doctor(ctx context.Context, o doctor.Options) []vault.Finding {
	c := &couchDoctor{db: d, f: doctor.New(o)}
	c.run(ctx)
	return c.f.List
}

type couchDoctor struct {
	db *DB
	f  *doctor.Findings
}

func (c *couchDoctor) run(ctx context.Context) {
	if !c.checkServer(ctx) || !c.checkDatabase(ctx) {
		return
	}
	c.checkVersion(ctx)
	salt, ok := c.checkSyncParameters(ctx)
	if !ok {
		return
	}
	raw, err := c.db.GetLocal(ctx, strings.TrimPrefix(negotiate.MilestoneDocID, localPrefix))
	settings, ok := c.f.Milestone(raw, err, negotiate.CouchDBChunkRange)
	if !ok {
		return
	}
	codec := c.checkPassphrase(ctx, settings, salt)
	c.checkChunks(ctx, codec)
	c.checkServerConfig(ctx)
}

// get sends an authenticated GET for path below the server and decodes a
// JSON answer; it returns the HTTP status (0 for a transport failure).
func (c *couchDoctor) get(ctx context.Context, path string, out any) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	u := *c.db.base
	u.Path = strings.TrimRight(u.Path, "/") + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.db.hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is named by the finding
		}
		return 0, &engine.Error{Op: "GET " + path, Stage: engine.StageTransport, Err: err}
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

func (c *couchDoctor) checkServer(ctx context.Context) bool {
	var welcome struct {
		Version string `json:"version"`
		Vendor  struct {
			Name string `json:"name"`
		} `json:"vendor"`
	}
	status, err := c.get(ctx, "/", &welcome)
	switch {
	case err != nil && status == 0:
		c.f.Problem("server", c.f.O.Codes.Unreachable, "cannot reach "+c.db.base.String()+": "+c.f.Cause(err),
			"check the URL (scheme, host and port), that the server is running, and that this machine can reach it")
		return false
	case status >= 500:
		c.f.Problem("server", c.f.O.Codes.Unreachable, fmt.Sprintf("the server answers HTTP %d", status), "look at the server's log; try again later")
		return false
	}
	name := welcome.Vendor.Name
	if name == "" {
		name = "a CouchDB-compatible server"
	}
	if welcome.Version != "" {
		name += " " + welcome.Version
	}
	c.f.OK("server", "reachable: "+name)
	return true
}

func (c *couchDoctor) checkDatabase(ctx context.Context) bool {
	var info struct {
		DocCount int64 `json:"doc_count"`
	}
	name, user := c.db.Name(), c.db.cfg.User
	status, err := c.get(ctx, "/"+name, &info)
	switch {
	case err != nil && status == 0:
		c.f.Problem("database", c.f.O.Codes.Unreachable, err.Error(), "try again")
		return false
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		who := "anonymous requests are"
		if user != "" {
			who = fmt.Sprintf("the user %q is", user)
		}
		c.f.Problem("login", c.f.O.Codes.Auth, fmt.Sprintf("%s refused (HTTP %d)", who, status),
			"check the user name and password ($LIVESYNC_PASSWORD, --password-file), and that the user may read and write the database (its _security members)")
		return false
	case status == http.StatusNotFound:
		push := c.f.Command(doctor.Push)
		fd := vault.Finding{Check: "database", Status: vault.FindingProblem, Code: c.f.O.Codes.Refused,
			Message: fmt.Sprintf("the database %q does not exist", name),
			Advice:  fmt.Sprintf("check its name; a push creates it with the vault: %s (or livesync import DIR with the remote)", c.f.Line(push))}
		if push != nil {
			fd.Commands = [][]string{push}
		}
		c.f.Add(fd)
		return false
	case status/100 != 2:
		c.f.Problem("database", c.f.O.Codes.Failed, fmt.Sprintf("reading the database answers HTTP %d", status), "look at the server's log")
		return false
	}
	if user != "" {
		c.f.OK("login", fmt.Sprintf("the user %q is accepted", user))
	}
	c.f.OK("database", fmt.Sprintf("%q exists (%d documents)", name, info.DocCount))
	return true
}

func (c *couchDoctor) checkVersion(ctx context.Context) {
	var raw json.RawMessage
	status, err := c.get(ctx, "/"+c.db.Name()+"/"+negotiate.VersionDocID, &raw)
	if err != nil {
		c.f.Warn("version", "the version document could not be read: "+err.Error(), "")
		return
	}
	if status == http.StatusNotFound {
		c.f.OK("version", "no version document yet (the first sync writes it)")
		return
	}
	v, err := negotiate.ParseVersionDoc(raw)
	if err == nil {
		_, err = negotiate.CheckVersion(&v)
	}
	if err != nil {
		c.f.Problem("version", c.f.O.Codes.Refused, "the database was written by a newer or different client ("+err.Error()+")",
			"update livesync-go and every device to the newest version")
		return
	}
	c.f.OK("version", fmt.Sprintf("database format %v", v.Version))
}

func (c *couchDoctor) checkSyncParameters(ctx context.Context) ([]byte, bool) {
	raw, err := c.db.GetLocal(ctx, strings.TrimPrefix(negotiate.SyncParametersDocID, localPrefix))
	switch {
	case errors.Is(err, engine.ErrNotFound):
		c.f.OK("salt", "no sync parameters yet: the vault is new, and the first sync creates its salt")
		return nil, true
	case err != nil:
		code, msg := c.f.Explain(err)
		c.f.Problem("salt", code, "the sync parameters could not be read: "+msg, "")
		return nil, false
	}
	p, err := negotiate.ParseSyncParameters(raw)
	if err != nil {
		c.f.Problem("salt", c.f.O.Codes.Refused, "the sync parameters document is damaged: "+err.Error(),
			"restore it from a backup of the database; a new salt would make the vault's data unreadable")
		return nil, false
	}
	salt, err := p.Salt()
	if errors.Is(err, negotiate.ErrNoSalt) {
		c.f.OK("salt", "the sync parameters have no salt yet: the first sync creates it")
		return nil, true
	}
	if err != nil {
		c.f.Problem("salt", c.f.O.Codes.Refused, "the sync parameters hold an unreadable salt: "+err.Error(),
			"restore the document from a backup of the database")
		return nil, false
	}
	c.f.OK("salt", "the vault's salt is there")
	return salt, true
}

// checkPassphrase decrypts a few of the remote's documents; on failure it
// tells a wrong passphrase from a changed salt when the local replica
// holds chunks the remote has too (chunk ids depend on the passphrase,
// not on the salt). It returns a codec for the data checks, or nil.
func (c *couchDoctor) checkPassphrase(ctx context.Context, s livesync.Settings, salt []byte) *livesync.Codec {
	f := c.f
	if !vault.NeedsPassphrase(s) {
		codec, err := livesync.New(livesync.Config{Settings: s, Salt: salt})
		if err != nil {
			f.Problem("passphrase", f.O.Codes.Failed, err.Error(), "")
			return nil
		}
		f.OK("passphrase", "not needed: the vault is not encrypted")
		return codec
	}
	pass, err := f.Passphrase()
	if err != nil {
		f.Skipped("passphrase", "the vault is encrypted and no passphrase was given, so its data was not checked",
			"set LIVESYNC_PASSPHRASE or use --passphrase-file to check it")
		return nil
	}
	s.Passphrase = pass
	if salt == nil {
		f.OK("passphrase", "nothing to check yet: the vault has no salt")
		return nil
	}
	codec, err := livesync.New(livesync.Config{Settings: s, Salt: salt})
	if err != nil {
		f.Problem("passphrase", f.O.Codes.Failed, err.Error(), "")
		return nil
	}
	err = vault.CheckEndpointPassphrase(ctx, c.db, codec)
	if err == nil {
		f.OK("passphrase", "the remote's data decrypts with this passphrase")
		return codec
	}
	if !errors.Is(err, engine.ErrDecrypt) {
		code, msg := f.Explain(err)
		f.Problem("passphrase", code, msg, "")
		return nil
	}
	if f.O.Local.Present && c.sharesChunks(ctx) {
		f.Problem("passphrase", f.O.Codes.Passphrase,
			"the passphrase is right (the remote holds chunks whose ids it gives), but the remote's documents do not decrypt with its current salt: its sync parameters were reset after the data was written",
			"restore _local/obsidian_livesync_sync_parameters from a backup of the database, or rebuild the remote from a device that has the whole vault")
		return nil
	}
	f.Problem("passphrase", f.O.Codes.Passphrase, "the remote's documents do not decrypt: the passphrase is wrong, or the remote's salt was reset after its data was written",
		"check the passphrase ($LIVESYNC_PASSPHRASE, --passphrase-file, the passphrase_file of the configuration); if it is right, the remote must be rebuilt from a device that has the whole vault")
	return nil
}

// sharesChunks reports whether a few of the replica's encrypted chunk ids
// exist on the remote.
func (c *couchDoctor) sharesChunks(ctx context.Context) bool {
	if c.f.O.Local.ChunkIDs == nil {
		return false
	}
	local := c.f.O.Local.ChunkIDs()
	if len(local) == 0 {
		return false
	}
	ids, err := c.db.ChunkIDs(ctx)
	if err != nil {
		return false
	}
	for _, id := range local {
		if ids[id] {
			return true
		}
	}
	return false
}
