package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/crypto/acme"
	"golang.org/x/crypto/acme/autocert"
)

// acmeWarmTimeout bounds the first certificate's order at start (the CA
// validating the challenge included).
const acmeWarmTimeout = 5 * time.Minute

// tlsRuntime is the relay's own HTTPS when it is ACME or self-signed.
type tlsRuntime struct {
	self *selfSignedCert
	// acme obtains and renews the certificates of domains.
	acme     *autocert.Manager
	domains  []string
	cacheDir string
	// httpSrv answers the CA's HTTP-01 challenges on httpLn
	// (acme_http_listen) and redirects everything else to HTTPS.
	httpSrv *http.Server
	httpLn  net.Listener
}

// startTLS turns the listener into an HTTPS one with an ACME or a
// self-signed certificate. It runs once the data folder is locked (the
// certificates are kept there) and before anything else is written to
// it.
func (r *relay) startTLS(cleanup *[]func()) error {
	s := r.s
	switch {
	case s.tls.selfSigned:
		return r.startSelfSigned()
	case s.tls.acme != nil:
		return r.startACME(cleanup)
	}
	return nil
}

// tlsServerConfig is what every way of the relay's HTTPS shares.
func tlsServerConfig(cfg *tls.Config) *tls.Config {
	cfg.MinVersion = tls.VersionTLS12
	if len(cfg.NextProtos) == 0 {
		cfg.NextProtos = []string{"h2", "http/1.1"}
	}
	return cfg
}

func (r *relay) startSelfSigned() error {
	host, _, _ := net.SplitHostPort(r.s.listen)
	all, required := selfSignedNames(host, r.s.tls.selfSignedNames)
	c, err := loadOrCreateSelfSigned(r.s.selfSignedDir(), all, required, time.Now())
	if err != nil {
		return err
	}
	r.tls = &tlsRuntime{self: c}
	names := append(append([]string(nil), c.leaf.DNSNames...), ipStrings(c.leaf.IPAddresses)...)
	attrs := []any{"file", c.certPath, "sha256", fingerprint(c.leaf.Raw), "not_after", c.leaf.NotAfter.UTC().Format(time.RFC3339), "names", strings.Join(names, " ")}
	if c.created {
		r.log.Info("TLS: made a self-signed certificate ("+c.why+")", attrs...)
	} else {
		r.log.Info("TLS: serving the kept self-signed certificate", attrs...)
	}
	r.ln = tls.NewListener(r.ln, tlsServerConfig(&tls.Config{Certificates: []tls.Certificate{c.cert}}))
	r.url = "https://" + displayAddr(r.ln.Addr())
	return nil
}

func ipStrings(ips []net.IP) []string {
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = ip.String()
	}
	return out
}

// acmeCacheFor is the folder of one ACME directory's account and
// certificates: a certificate from a staging or test CA is not served
// once the configuration names another CA.
func acmeCacheFor(base, directory string) string {
	host := directory
	if u, err := url.Parse(directory); err == nil && u.Host != "" {
		host = u.Host
	}
	host = strings.Map(func(c rune) rune {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' {
			return c
		}
		return '_'
	}, host)
	return filepath.Join(base, host)
}

func (r *relay) startACME(cleanup *[]func()) error {
	a := r.s.tls.acme
	client := &acme.Client{DirectoryURL: a.directory, UserAgent: "livesync-relay"}
	if a.caFile != "" {
		pem, err := os.ReadFile(a.caFile)
		if err != nil {
			return fmt.Errorf("tls: acme_ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("tls: acme_ca_file %s: no PEM certificate in it", a.caFile)
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		client.HTTPClient = &http.Client{Transport: tr}
	}
	dir := acmeCacheFor(r.s.acmeCacheDir(), a.directory)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("tls: the ACME cache: %w", err)
	}
	m := &autocert.Manager{
		Prompt: autocert.AcceptTOS, Cache: autocert.DirCache(dir), HostPolicy: autocert.HostWhitelist(a.domains...),
		Email: a.email, Client: client,
	}
	rt := &tlsRuntime{acme: m, domains: a.domains, cacheDir: dir}
	_, port, _ := net.SplitHostPort(r.ln.Addr().String())
	if a.httpListen != "" {
		ln, err := net.Listen("tcp", a.httpListen)
		if err != nil {
			return fmt.Errorf("tls: acme_http_listen: cannot listen on %s: %w", a.httpListen, err)
		}
		*cleanup = append(*cleanup, func() { ln.Close() })
		rt.httpLn = ln
		rt.httpSrv = &http.Server{
			Handler:           hostWithoutPort(m.HTTPHandler(httpsRedirect(a.domains, port))),
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          slog.NewLogLogger(r.log.With("component", "acme-http").Handler(), slog.LevelWarn),
		}
	}
	cfg := m.TLSConfig() // h2, http/1.1 and acme-tls/1 (the TLS-ALPN-01 challenge)
	r.tls = rt
	r.ln = tls.NewListener(r.ln, tlsServerConfig(cfg))
	r.url = "https://" + a.domains[0]
	if port != "443" {
		r.url += ":" + port
	}
	r.log.Info("TLS: certificates from an ACME CA", "domains", strings.Join(a.domains, " "), "directory", a.directory, "cache", dir, "http_01", a.httpListen)
	return nil
}

// hostWithoutPort strips a port from the Host header: the ACME
// manager's host policy compares it with bare names, and a CA that checks
// on another port than 80 (a test CA) names that port.
func hostWithoutPort(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if host, _, err := net.SplitHostPort(req.Host); err == nil {
			req = req.Clone(req.Context())
			req.Host = host
		}
		h.ServeHTTP(w, req)
	})
}

// httpsRedirect sends a request for one of domains to the same path over
// HTTPS on the relay's port (308: the method and body are kept).
func httpsRedirect(domains []string, port string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		host := req.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.ToLower(host)
		if !slices.Contains(domains, host) {
			http.Error(w, "this relay serves HTTPS only", http.StatusNotFound)
			return
		}
		if port != "443" {
			host = net.JoinHostPort(host, port)
		}
		http.Redirect(w, req, "https://"+host+req.URL.RequestURI(), http.StatusPermanentRedirect)
	})
}

// runTLS starts the HTTP-01 listener and, in the background, asks for
// every ACME name's certificate at once (from the cache, or from the CA
// through the serving listener), so that the first client does not wait
// for it and a failure shows in the log at start. It ends with ctx.
func (r *relay) runTLS(ctx context.Context) {
	rt := r.tls
	if rt == nil || rt.acme == nil {
		return
	}
	if rt.httpSrv != nil {
		go func() {
			if err := rt.httpSrv.Serve(rt.httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				r.log.Error("TLS: the HTTP-01 listener stopped", "err", err)
			}
		}()
		go func() { <-ctx.Done(); rt.httpSrv.Close() }()
	}
	addr := loopbackDialAddr(r.ln.Addr())
	for _, d := range rt.domains {
		go r.warmCertificate(ctx, addr, d)
	}
}

// warmCertificate connects to the relay itself for name, which makes the
// ACME manager load or obtain its certificate, and logs the outcome.
func (r *relay) warmCertificate(ctx context.Context, addr, name string) {
	ctx, cancel := context.WithTimeout(ctx, acmeWarmTimeout)
	defer cancel()
	d := tls.Dialer{Config: &tls.Config{ServerName: name, InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}}} // only reads what the relay serves
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		if ctx.Err() == nil || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			r.log.Warn("TLS: no certificate yet from the ACME CA; the next connection tries again", "domain", name, "err", err,
				"hint", "the name must resolve to this machine and the CA must reach this relay on port 443 (TLS-ALPN-01) or, with acme_http_listen, port 80 (HTTP-01)")
		}
		return
	}
	defer conn.Close()
	st := conn.(*tls.Conn).ConnectionState()
	if len(st.PeerCertificates) == 0 {
		return
	}
	leaf := st.PeerCertificates[0]
	r.log.Info("TLS: certificate ready", "domain", name, "issuer", leaf.Issuer.CommonName, "not_after", leaf.NotAfter.UTC().Format(time.RFC3339))
}

// loopbackDialAddr is an address to reach a listener from the same
// machine: a loopback one when it listens on every interface.
func loopbackDialAddr(a net.Addr) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	ip := ta.IP
	if ip.IsUnspecified() {
		ip = net.IPv4(127, 0, 0, 1)
		if ta.IP.To4() == nil {
			ip = net.IPv6loopback
		}
	}
	return net.JoinHostPort(ip.String(), fmt.Sprint(ta.Port))
}

// tlsBanner tells how the relay's HTTPS certificate comes about: for a
// self-signed one, its fingerprint, to check or pin it.
func (r *relay) tlsBanner(p func(string, ...any)) {
	rt := r.tls
	switch {
	case rt == nil:
		return
	case rt.self != nil:
		c := rt.self
		what := "kept from an earlier start"
		if c.created {
			what = "made now"
		}
		p("")
		p("HTTPS with a self-signed certificate, %s, valid until %s:", what, c.leaf.NotAfter.UTC().Format(time.DateOnly))
		p("    %s", c.certPath)
		p("Its SHA-256 fingerprint, to compare when a computer asks whether to trust it, or to pin:")
		p("    %s", fingerprint(c.leaf.Raw))
		p("On a desktop, add that file to the system's trusted certificates. Obsidian on phones")
		p("needs a publicly trusted certificate: give the relay a public name ([tls] acme_domains)")
		p("or put a reverse proxy with such a certificate in front.")
	case rt.acme != nil:
		p("")
		p("HTTPS with certificates for %s from %s,", strings.Join(rt.domains, ", "), r.s.tls.acme.directory)
		p("obtained at start (the log says when) and renewed by the relay; kept in %s.", rt.cacheDir)
		if _, port, _ := net.SplitHostPort(r.ln.Addr().String()); port != "443" && rt.httpSrv == nil {
			p("The CA checks the name on port 443: forward port 443 to port %s here, or set acme_http_listen = \":80\".", port)
		}
	}
}
