package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

const healthcheckUsage = `usage: livesync-relay healthcheck [flags]

Checks a running relay for a container or service health check: GET
/healthz, which answers 200 while the relay serves and 503 once it is
shutting down. Prints one line ("healthy: ..." or "unhealthy: why") and
exits 0 when healthy, 1 otherwise (a wrong flag too: Docker reserves 2).

Without --url the address is the relay's own, read as the relay reads it:
--listen, else listen in the configuration (--config, else
$LIVESYNC_RELAY_CONFIG), else 127.0.0.1:5984; a wildcard host (0.0.0.0,
::, none) is checked on loopback. With [tls] in the configuration the
check uses https and trusts, besides the system's CAs, the certificate
the relay serves: cert_file, or the self_signed one in the data folder
(--data-dir, else data_dir) whatever name it carries (the check dials
loopback, a name certificates rarely have); with acme_domains it asks
for the first of them. A certificate from a private CA needs --ca.

/healthz says only that the relay serves: an upstream that is down or a
growing pile of held documents is not a reason to restart it. --deep
also reads /status as an admin and reports what needs a person: an
upstream in state "error" or without a successful exchange for
--max-stale, a database kept on CouchDB that cannot be reached, a
database at its held-document limit (new pushes are refused). The admin's
credentials come from $LIVESYNC_RELAY_ADMIN_USER and
$LIVESYNC_RELAY_ADMIN_PASSWORD (or _FILE), else the first admin of
[[users]] with password_file or password_env; none are needed with
metrics_public = true.

flags:
  --url URL            the relay's base URL (e.g. https://relay.example.com:6984);
                       its certificate is then checked against the URL's name
  --config FILE        configuration file (default $LIVESYNC_RELAY_CONFIG)
  --listen HOST:PORT   the relay's listen address (overrides the configuration)
  --data-dir DIR       the relay's data folder, where a self_signed certificate is
                       kept (overrides the configuration)
  --tls-self-signed    the relay runs with --tls-self-signed
  --timeout DURATION   for the whole check (default 5s)
  --insecure           do not verify the server's certificate
  --ca FILE            also trust this PEM certificate or CA
  --deep               also check /status (see above)
  --max-stale DURATION with --deep: longest time an upstream may go without a
                       successful exchange (default 10m)
`

func init() {
	register("healthcheck", subcommand{
		summary: "check a running relay's /healthz; exit 0 healthy, 1 not (container health checks)",
		run:     runHealthcheck,
	})
}

// healthOptions are the healthcheck's flags.
type healthOptions struct {
	url, config, listen, dataDir, ca string
	timeout, maxStale                time.Duration
	insecure, deep, selfSigned       bool
}

// healthTarget is where and how the check connects, resolved from the
// flags and the relay's configuration.
type healthTarget struct {
	base   *url.URL
	tls    *tls.Config
	client *http.Client
	// user and password are the admin's for --deep ("" with
	// metrics_public or without --deep); never printed.
	user, password string
	needAuth       bool
}

func runHealthcheck(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	fs := flag.NewFlagSet("livesync-relay healthcheck", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var o healthOptions
	fs.StringVar(&o.url, "url", "", "")
	fs.StringVar(&o.config, "config", "", "")
	fs.StringVar(&o.listen, "listen", "", "")
	fs.StringVar(&o.dataDir, "data-dir", "", "")
	fs.StringVar(&o.ca, "ca", "", "")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Second, "")
	fs.DurationVar(&o.maxStale, "max-stale", 10*time.Minute, "")
	fs.BoolVar(&o.insecure, "insecure", false, "")
	fs.BoolVar(&o.deep, "deep", false, "")
	fs.BoolVar(&o.selfSigned, "tls-self-signed", false, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			io.WriteString(stderr, healthcheckUsage)
			return exitOK
		}
		fmt.Fprintf(stderr, "unhealthy: livesync-relay healthcheck: %v (see -h)\n", err)
		return exitFailure
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "unhealthy: livesync-relay healthcheck: unexpected argument %q (see -h)\n", fs.Arg(0))
		return exitFailure
	}
	if o.timeout <= 0 {
		o.timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	msg, err := healthcheck(ctx, o, getenv)
	if err != nil {
		fmt.Fprintf(stderr, "unhealthy: %s\n", oneLine(err.Error()))
		return exitFailure
	}
	fmt.Fprintf(stderr, "healthy: %s\n", oneLine(msg))
	return exitOK
}

// oneLine keeps a reason on one line, as health check logs show it.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// healthcheck runs the check and says what it found: a summary when
// healthy, the reason as the error otherwise.
func healthcheck(ctx context.Context, o healthOptions, getenv func(string) string) (string, error) {
	t, err := resolveHealthTarget(o, getenv)
	if err != nil {
		return "", err
	}
	start := time.Now()
	hz := t.base.JoinPath("healthz").String()
	if err := t.checkHealthz(ctx, hz); err != nil {
		return "", err
	}
	msg := fmt.Sprintf("%s ok in %s", hz, time.Since(start).Round(time.Millisecond))
	if !o.deep {
		return msg, nil
	}
	var st statusDoc
	if err := t.getJSON(ctx, t.base.JoinPath("status").String(), &st); err != nil {
		return "", err
	}
	summary, problems := judgeStatus(&st, time.Now(), o.maxStale)
	if len(problems) > 0 {
		return "", errors.New(strings.Join(problems, "; "))
	}
	return msg + "; " + summary, nil
}

// checkHealthz wants 200 {"status":"ok"} from /healthz.
func (t *healthTarget) checkHealthz(ctx context.Context, u string) error {
	code, body, err := t.get(ctx, u, false)
	if err != nil {
		return err
	}
	var doc struct {
		Status string `json:"status"`
	}
	jerr := json.Unmarshal(body, &doc)
	switch {
	case code == http.StatusOK && jerr == nil && doc.Status == "ok":
		return nil
	case jerr == nil && doc.Status != "":
		return fmt.Errorf("%s: %d %s", u, code, doc.Status)
	}
	return fmt.Errorf("%s: %d %s (is this a livesync-relay?)", u, code, snippet(body))
}

// getJSON reads an admin endpoint into v.
func (t *healthTarget) getJSON(ctx context.Context, u string, v any) error {
	code, body, err := t.get(ctx, u, true)
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		hint := ""
		if code == http.StatusUnauthorized || code == http.StatusForbidden {
			hint = " (--deep needs the admin's credentials: see -h)"
		}
		return fmt.Errorf("%s: %d %s%s", u, code, snippet(body), hint)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%s: %v", u, err)
	}
	return nil
}

// get sends one GET and reads at most 4 MiB of the answer.
func (t *healthTarget) get(ctx context.Context, u string, auth bool) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, nil, err
	}
	if auth && t.needAuth {
		req.SetBasicAuth(t.user, t.password)
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return 0, nil, explainDialError(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return 0, nil, fmt.Errorf("%s: reading the answer: %w", u, err)
	}
	return resp.StatusCode, body, nil
}

// explainDialError adds what to do to the usual failures.
func explainDialError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) && ue.Timeout() {
		return fmt.Errorf("%s: no answer within the timeout (a relay that is stuck, or a firewall?)", ue.URL)
	}
	var he x509.HostnameError
	if errors.As(err, &he) {
		return fmt.Errorf("%v (give --url with a name the certificate carries, or --insecure)", err)
	}
	var cv *tls.CertificateVerificationError
	if errors.As(err, &cv) {
		return fmt.Errorf("%v (trust it with --ca FILE, or skip the check with --insecure)", err)
	}
	return err
}

// snippet is the start of an unexpected answer, for the reason line.
func snippet(b []byte) string {
	s := oneLine(string(b))
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}

// resolveHealthTarget works out the URL, the TLS trust and, for --deep,
// the credentials.
func resolveHealthTarget(o healthOptions, getenv func(string) string) (*healthTarget, error) {
	if o.config == "" {
		o.config = getenv(envConfig)
	}
	fc := &fileConfig{}
	if o.config != "" {
		var err error
		if fc, err = loadConfig(o.config); err != nil {
			return nil, err
		}
	}
	if o.selfSigned && !fc.TLS.on() {
		fc.TLS.SelfSigned = true
	}
	t := &healthTarget{}
	var err error
	derived := o.url == ""
	if derived {
		t.base, err = relayBaseURL(fc, o.listen)
	} else {
		t.base, err = url.Parse(strings.TrimSuffix(strings.TrimSuffix(o.url, "/"), "/healthz"))
		if err == nil && (t.base.Scheme != "http" && t.base.Scheme != "https" || t.base.Host == "") {
			err = fmt.Errorf("--url %q: want http(s)://host:port", o.url)
		}
	}
	if err != nil {
		return nil, err
	}
	if t.tls, err = healthTLS(o, relayTrusts(fc, o.dataDir), derived); err != nil {
		return nil, err
	}
	if derived && len(fc.TLS.ACMEDomains) > 0 {
		// The relay picks an ACME certificate by the name the client
		// asks for (SNI); loopback is none of them.
		t.tls.ServerName = fc.TLS.ACMEDomains[0]
	}
	t.client = &http.Client{Transport: &http.Transport{
		Proxy: nil, TLSClientConfig: t.tls, DisableKeepAlives: true, ForceAttemptHTTP2: true,
	}}
	if o.deep && !fc.MetricsPublic {
		if t.user, t.password, err = healthCredentials(fc, getenv); err != nil {
			return nil, err
		}
		t.needAuth = true
	}
	return t, nil
}

// relayBaseURL is the URL the relay serves on, from its listen address
// (a wildcard host is reached on loopback) and whether it serves TLS.
func relayBaseURL(fc *fileConfig, listenFlag string) (*url.URL, error) {
	listen := defaultListen
	if fc.Listen != "" {
		listen = fc.Listen
	}
	if listenFlag != "" {
		listen = listenFlag
	}
	host, port, err := splitListen(listen)
	if err != nil {
		return nil, err
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::", "[::]":
		host = "::1"
	}
	scheme := "http"
	if fc.TLS.on() {
		scheme = "https"
	}
	return &url.URL{Scheme: scheme, Host: net.JoinHostPort(host, port)}, nil
}

// relayTrusts lists the PEM files of the certificates the relay's
// configuration serves or was issued from: cert_file, the self_signed
// certificate in the data folder, an ACME CA of its own (acme_ca_file).
func relayTrusts(fc *fileConfig, dataDirFlag string) []string {
	switch t := fc.TLS; {
	case t.CertFile != "":
		return []string{fc.resolvePath(t.CertFile)}
	case t.SelfSigned:
		dir := defaultDataDir
		switch {
		case dataDirFlag != "":
			dir = dataDirFlag
		case fc.DataDir != "":
			dir = fc.resolvePath(fc.DataDir)
		}
		return []string{filepath.Join(dir, tlsSelfSignedDir, selfSignedCertFile)}
	case t.ACMECAFile != "":
		return []string{fc.resolvePath(t.ACMECAFile)}
	}
	return nil
}

// healthTLS is the client's TLS configuration: the system's CAs plus
// --ca and the relay's own (trust). For the relay's own address
// (derived) the name is not checked: the check dials loopback, a name
// the certificate rarely carries.
func healthTLS(o healthOptions, trust []string, derived bool) (*tls.Config, error) {
	if o.insecure {
		return &tls.Config{InsecureSkipVerify: true}, nil
	}
	roots, err := x509.SystemCertPool()
	if err != nil {
		roots = x509.NewCertPool()
	}
	files := trust
	if o.ca != "" {
		files = append([]string{o.ca}, files...)
	}
	for _, f := range files {
		if err := addPEMCerts(roots, f); err != nil {
			return nil, err
		}
	}
	if !derived {
		return &tls.Config{RootCAs: roots}, nil
	}
	return &tls.Config{
		// Verified below, without the name.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the server sent no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
			if err != nil {
				return &tls.CertificateVerificationError{UnverifiedCertificates: cs.PeerCertificates, Err: err}
			}
			return nil
		},
	}, nil
}

// addPEMCerts adds every certificate of a PEM file (a chain, a CA, a
// self-signed certificate) to pool.
func addPEMCerts(pool *x509.CertPool, file string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("reading the certificate to trust: %w", err)
	}
	n := 0
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 {
		return fmt.Errorf("%s: no PEM certificate in it", file)
	}
	return nil
}

// healthCredentials finds the admin's credentials the way the relay
// itself gets them: the built-in admin's environment, else an admin of
// [[users]] whose password is in a file or a variable.
func healthCredentials(fc *fileConfig, getenv func(string) string) (string, string, error) {
	pw := getenv(envAdminPassword)
	if f := getenv(envAdminPasswordFile); f != "" && pw == "" {
		var err error
		if pw, err = readSecretFile(f, "admin password"); err != nil {
			return "", "", err
		}
	}
	if pw != "" {
		name := getenv(envAdminUser)
		if name == "" {
			name = defaultAdminName
		}
		return name, pw, nil
	}
	for _, u := range fc.Users {
		if !u.Admin || (u.PasswordFile == "" && u.PasswordEnv == "") {
			continue
		}
		pw, err := secretFrom(fc.resolvePath(u.PasswordFile), u.PasswordEnv, getenv, "password")
		if err != nil {
			return "", "", fmt.Errorf("--deep: admin %q: %v", u.Name, err)
		}
		return u.Name, pw, nil
	}
	return "", "", fmt.Errorf("--deep reads /status, which needs an admin: set %s (or _FILE), or give an admin of [[users]] a password_file or password_env", envAdminPassword)
}
