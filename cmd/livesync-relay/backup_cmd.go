package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"
)

func init() {
	register("backup", subcommand{summary: "write a backup of a relay's data folder (online through the relay, or --data-dir offline)", run: runBackup})
}

const backupUsage = `usage: livesync-relay backup --out FILE [--url URL] [--user NAME] [--password-file FILE]
       livesync-relay backup --out FILE --data-dir DIR

Writes a backup of the relay's whole data folder to FILE (a tar archive
with a manifest of SHA-256 sums; "-" writes to stdout). By default the
running relay at URL streams it: every database is a consistent copy made
while clients go on writing. With --data-dir, the folder of a stopped
relay is read directly (refused while a relay runs on it).

flags:
  --out FILE             where to write the backup (required; never replaced)
  --url URL              the running relay (default http://127.0.0.1:5984)
  --user NAME            an admin of the relay (default $LIVESYNC_RELAY_ADMIN_USER, else admin)
  --password-file FILE   a file holding the admin's password (else
                         $LIVESYNC_RELAY_ADMIN_PASSWORD, $LIVESYNC_RELAY_ADMIN_PASSWORD_FILE,
                         or a prompt on a terminal)
  --ca-file FILE         trust this certificate (PEM) for an https:// URL, e.g.
                         the relay's self-signed one
  --data-dir DIR         back up a stopped relay's data folder instead
`

type backupFlags struct {
	out, url, user, passwordFile, dataDir, caFile string
}

func runBackup(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	fs := backupFlagSet("livesync-relay backup")
	var fl backupFlags
	fs.StringVar(&fl.out, "out", "", "")
	fs.StringVar(&fl.url, "url", "http://127.0.0.1:5984", "")
	fs.StringVar(&fl.user, "user", "", "")
	fs.StringVar(&fl.passwordFile, "password-file", "", "")
	fs.StringVar(&fl.dataDir, "data-dir", "", "")
	fs.StringVar(&fl.caFile, "ca-file", "", "")
	if code, done := parseBackupFlags(fs, args, backupUsage, stderr); done {
		return code
	}
	if fl.out == "" {
		fmt.Fprintf(stderr, "livesync-relay backup: --out FILE is required\n\n%s", backupUsage)
		return exitUsage
	}
	start := time.Now()
	m, size, err := doBackup(ctx, fl, getenv, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "livesync-relay backup: %v\n", err)
		if errors.As(err, new(usageError)) {
			return exitUsage
		}
		return exitFailure
	}
	fmt.Fprintf(stderr, "livesync-relay backup: %s (%s, %s) in %s\n", backupDisplayOut(fl.out), describeFiles(m), backupBytes(size), time.Since(start).Round(time.Millisecond))
	return exitOK
}

func backupFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parseBackupFlags parses a subcommand's flags; done says to return code.
func parseBackupFlags(fs *flag.FlagSet, args []string, usage string, stderr io.Writer) (code int, done bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			io.WriteString(stderr, usage)
			return exitOK, true
		}
		fmt.Fprintf(stderr, "%s: %v\n\n%s", fs.Name(), err, usage)
		return exitUsage, true
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n\n%s", fs.Name(), fs.Arg(0), usage)
		return exitUsage, true
	}
	return 0, false
}

// doBackup writes the archive to a temporary file next to --out, checks
// it whole (as restore will), and only then gives it its name, so FILE
// is a complete backup or absent.
func doBackup(ctx context.Context, fl backupFlags, getenv func(string) string, stderr io.Writer) (*backupManifest, int64, error) {
	var out *os.File
	var tmp string
	if fl.out == "-" {
		out = os.Stdout
	} else {
		if _, err := os.Lstat(fl.out); err == nil {
			return nil, 0, usageError{fmt.Sprintf("%s exists; a backup never replaces a file: remove it or choose another name", fl.out)}
		}
		f, err := os.CreateTemp(filepath.Dir(fl.out), "."+filepath.Base(fl.out)+".partial-*")
		if err != nil {
			return nil, 0, err
		}
		out, tmp = f, f.Name()
		defer func() { out.Close(); os.Remove(tmp) }() // after the rename: nothing to remove
	}
	p := newBackupProgress(stderr, "backup")
	defer p.done()
	var m *backupManifest
	var err error
	if fl.dataDir != "" {
		if entries, err := listDataFolder(fl.dataDir); err == nil {
			for _, e := range entries {
				p.total += e.size
			}
		}
		m, err = backupOffline(fl.dataDir, io.MultiWriter(out, p), time.Now())
		if err == nil && tmp != "" {
			m, err = verifyArchiveFile(tmp)
		}
	} else {
		m, err = backupOnline(ctx, fl, getenv, out, p)
	}
	if err != nil {
		return nil, 0, err
	}
	if tmp == "" {
		return m, p.n, nil
	}
	if err := out.Sync(); err != nil {
		return nil, 0, err
	}
	if err := out.Close(); err != nil {
		return nil, 0, err
	}
	if err := os.Rename(tmp, fl.out); err != nil {
		return nil, 0, err
	}
	syncBackupDir(filepath.Dir(fl.out))
	return m, p.n, nil
}

// backupOnline asks the relay at fl.url for a backup and writes it to
// out while checking it as it arrives.
func backupOnline(ctx context.Context, fl backupFlags, getenv func(string) string, out io.Writer, p *backupProgress) (*backupManifest, error) {
	user, password, err := adminCredentials(fl, getenv)
	if err != nil {
		return nil, err
	}
	url := strings.TrimSuffix(fl.url, "/") + backupRoute
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, usageError{fmt.Sprintf("--url %q: %v", fl.url, err)}
	}
	req.SetBasicAuth(user, password)
	client, err := backupClient(fl.caFile)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("the relay at %s cannot be reached (%w); if it is stopped, back its folder up with --data-dir", fl.url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, backupRefused(resp, user)
	}
	p.total, _ = strconv.ParseInt(resp.Header.Get(backupEstimateHeader), 10, 64)
	body := io.TeeReader(resp.Body, io.MultiWriter(out, p))
	m, err := readArchive(body, func(string, int64, io.Reader) error { return nil })
	if err != nil {
		return nil, fmt.Errorf("the relay's stream: %w", err)
	}
	if _, err := io.Copy(io.Discard, body); err != nil { // the tar's end padding
		return nil, err
	}
	return m, nil
}

// backupClient is the HTTP client of an online backup: the system's
// roots, or only the certificates of caFile.
func backupClient(caFile string) (*http.Client, error) {
	if caFile == "" {
		return http.DefaultClient, nil
	}
	pool := x509.NewCertPool()
	if err := addPEMCerts(pool, caFile); err != nil {
		return nil, usageError{"--ca-file: " + err.Error()}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: tr}, nil
}

// backupRefused explains a relay's answer other than 200.
func backupRefused(resp *http.Response, user string) error {
	var e struct{ Error, Reason string }
	json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&e)
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		return fmt.Errorf("the relay refused user %q: wrong name or password (give an admin's, e.g. the built-in admin's from the relay's first start)", user)
	case http.StatusForbidden:
		return fmt.Errorf("user %q is not an admin of the relay: a backup needs an admin", user)
	case http.StatusNotFound:
		return fmt.Errorf("the server has no %s endpoint: is it a livesync-relay of this version or newer?", backupRoute)
	}
	return fmt.Errorf("the relay answered %s: %s", resp.Status, e.Reason)
}

// adminCredentials resolves the admin's name and password: flags, then
// the relay's own environment variables, then a prompt on a terminal.
func adminCredentials(fl backupFlags, getenv func(string) string) (user, password string, err error) {
	user = fl.user
	if user == "" {
		user = getenv(envAdminUser)
	}
	if user == "" {
		user = defaultAdminName
	}
	file := fl.passwordFile
	if file == "" {
		password = getenv(envAdminPassword)
		file = getenv(envAdminPasswordFile)
	}
	if password == "" && file != "" {
		// Read as the relay reads it, so both see the same password.
		if password, err = readSecretFile(file, "admin password"); err != nil {
			return "", "", usageError{err.Error()}
		}
	}
	if password == "" && term.IsTerminal(int(os.Stdin.Fd())) {
		fmt.Fprintf(os.Stderr, "password of %s: ", user)
		b, err := term.ReadPassword(int(os.Stdin.Fd()))
		fmt.Fprintln(os.Stderr)
		if err != nil {
			return "", "", err
		}
		password = string(b)
	}
	if password == "" {
		return "", "", usageError{"no admin password: give --password-file, or set " + envAdminPassword + " or " + envAdminPasswordFile}
	}
	return user, password, nil
}

// verifyArchiveFile reads a written archive back whole.
func verifyArchiveFile(path string) (*backupManifest, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readArchive(f, func(string, int64, io.Reader) error { return nil })
}

func backupDisplayOut(out string) string {
	if out == "-" {
		return "written to stdout"
	}
	return "written to " + out
}

// describeFiles says what a manifest holds: its databases (with their
// store formats) and how many other files.
func describeFiles(m *backupManifest) string {
	var dbs []string
	other := 0
	for _, f := range m.Files {
		if f.Kind == fileBolt {
			dbs = append(dbs, fmt.Sprintf("%s (format %d)", strings.TrimSuffix(f.Path, ".db"), f.StoreFormat))
		} else {
			other++
		}
	}
	if len(dbs) == 0 {
		return fmt.Sprintf("no database, %d other files", other)
	}
	return fmt.Sprintf("databases %s and %d other files", strings.Join(dbs, ", "), other)
}

func backupBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// backupProgress counts bytes and, when stderr is a terminal, shows them on
// one line at most every 200 ms.
type backupProgress struct {
	w     io.Writer // nil: not a terminal
	what  string
	total int64 // estimate; 0 if unknown

	mu    sync.Mutex
	n     int64
	last  time.Time
	shown bool
}

func newBackupProgress(stderr io.Writer, what string) *backupProgress {
	p := &backupProgress{what: what}
	if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.w = stderr
	}
	return p
}

func (p *backupProgress) Write(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n += int64(len(b))
	if p.w != nil && time.Since(p.last) >= 200*time.Millisecond {
		p.last = time.Now()
		p.shown = true
		if p.total > 0 {
			fmt.Fprintf(p.w, "\r%s: %s of about %s   ", p.what, backupBytes(p.n), backupBytes(p.total))
		} else {
			fmt.Fprintf(p.w, "\r%s: %s   ", p.what, backupBytes(p.n))
		}
	}
	return len(b), nil
}

// done ends the progress line.
func (p *backupProgress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		fmt.Fprintf(p.w, "\r%s: %s\n", p.what, backupBytes(p.n))
		p.shown = false
	}
}

// syncBackupDir makes a rename in dir durable, where the platform allows.
func syncBackupDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
