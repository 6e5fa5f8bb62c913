package main

import (
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
)

// printBanner tells the person at the terminal where the relay listens,
// who the admin is (a generated password is shown here, once, and
// nowhere else) and how to point the Obsidian plugin at it.
func (r *relay) printBanner(w io.Writer) {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	p("")
	if r.s.noDataDir() {
		p("livesync-relay is listening on %s (every database kept on CouchDB; no data folder)", r.url)
	} else {
		p("livesync-relay is listening on %s (data in %s)", r.url, displayDir(r.s.dataDir))
	}
	for _, name := range r.s.databases {
		if st, ok := r.s.stores[name]; ok {
			p("Database %s is kept on CouchDB at %s, shared with every relay in front of it.", name, st.location())
		}
	}
	p("")
	user := r.admin.name
	password := "(the admin password)"
	switch r.admin.source {
	case adminGenerated, adminReset:
		what := "A new admin account was created"
		if r.admin.source == adminReset {
			what = "The admin password was reset"
		}
		p("%s. Its password is shown only this once;", what)
		p("the relay keeps only a hash of it, in %s:", displayDir(filepath.Join(r.s.dataDir, usersFile)))
		p("")
		p("    user:      %s", r.admin.name)
		p("    password:  %s", r.admin.password)
		p("")
		p("Lost it? Restart with --reset-admin-password.")
		password = "(the password above)"
	case adminStored:
		p("Admin user: %s. The admin password was printed at first start; reset with --reset-admin-password.", r.admin.name)
	case adminFromEnv:
		p("Admin user: %s, password from $%s.", r.admin.name, envAdminPassword)
	case adminFromEnvFile:
		p("Admin user: %s, password from the file named by $%s.", r.admin.name, envAdminPasswordFile)
	case adminConfigDefined:
		user = "(a user from the configuration)"
		password = "(that user's password)"
		p("Users come from the configuration file %s.", r.s.configPath)
	}
	db := defaultDatabase
	if len(r.s.databases) > 0 {
		db = r.s.databases[0]
	}
	p("")
	p("To sync a vault: in Obsidian, open Settings > Self-hosted LiveSync > Remote Configuration,")
	p("choose the remote type CouchDB and enter:")
	p("")
	p("    URI:            %s", r.url)
	p("    Username:       %s", user)
	p("    Password:       %s", password)
	p("    Database name:  %s", db)
	p("")
	p("Then turn on End-to-end encryption with a passphrase of your own, the same on every")
	p("device; the relay stores what the plugin sends and never needs the passphrase.")
	r.tlsBanner(p)
	if loopbackOnly(r.ln.Addr()) {
		p("Only this computer can reach this address. For a phone or another computer,")
		p("listen on an address they reach, with HTTPS (Obsidian on phones needs it):")
		p("set listen and [tls] in a configuration file (--config FILE; see")
		p("cmd/livesync-relay/relay.example.toml).")
	} else if strings.HasPrefix(r.url, "http:") {
		p("Obsidian on phones needs HTTPS: set [tls] in the configuration file, or put a")
		p("TLS proxy in front.")
	}
	p("")
	p("Health:   %s/healthz", r.url)
	access := "(admin)"
	if r.s.metricsPublic {
		access = "(public)"
	}
	p("Status:   %s/status    %s", r.url, access)
	p("Metrics:  %s/metrics   %s", r.url, access)
	r.p2pBanner(p)
	r.lsp2pBanner(p)
	p("Stop with Ctrl-C: feeds end and held documents are saved; the next start resumes them.")
	p("")
	io.WriteString(w, b.String())
}

// loopbackOnly reports a listener on a loopback address.
func loopbackOnly(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// displayDir shows a relative folder as ./DIR, so that it reads as a path.
func displayDir(d string) string {
	if filepath.IsAbs(d) || strings.HasPrefix(d, ".") {
		return d
	}
	return "." + string(filepath.Separator) + d
}
