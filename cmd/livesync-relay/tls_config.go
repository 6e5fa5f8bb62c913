package main

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/crypto/acme/autocert"
)

// The relay serves HTTPS in one of three ways, chosen in [tls]:
//   - cert_file and key_file: a certificate the operator provides;
//   - acme_domains: certificates from an ACME CA (Let's Encrypt by
//     default), obtained and renewed by the relay itself;
//   - self_signed: a certificate the relay makes for itself on first
//     start, for desktops and LANs that pin or trust it by fingerprint.
//
// None of them is the default: plain HTTP suits a loopback address and a
// relay behind a TLS reverse proxy.

// tlsCacheDir is the folder of the data folder that keeps the ACME
// account key and certificates; tlsSelfSignedDir keeps the self-signed
// certificate and its key.
const (
	tlsCacheDir      = "acme"
	tlsSelfSignedDir = "tls"
)

// on reports a [tls] table that turns HTTPS on, in any of its ways.
func (t tlsConfig) on() bool {
	return t.CertFile != "" || len(t.ACMEDomains) > 0 || t.SelfSigned
}

// acmeKeysSet reports ACME keys given besides acme_domains.
func (t tlsConfig) acmeKeysSet() []string {
	var keys []string
	for k, v := range map[string]string{"acme_email": t.ACMEEmail, "acme_directory": t.ACMEDirectory, "acme_ca_file": t.ACMECAFile, "acme_http_listen": t.ACMEHTTPListen} {
		if v != "" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// validate checks the [tls] table: one way at most, and each way's keys.
func (t tlsConfig) validate(bad func(string, ...any)) {
	if (t.CertFile == "") != (t.KeyFile == "") {
		bad("tls: give both cert_file and key_file, or neither")
	}
	var ways []string
	if t.CertFile != "" || t.KeyFile != "" {
		ways = append(ways, "cert_file/key_file")
	}
	if len(t.ACMEDomains) > 0 {
		ways = append(ways, "acme_domains")
	}
	if t.SelfSigned {
		ways = append(ways, "self_signed")
	}
	if len(ways) > 1 {
		bad("tls: %s are different ways to get a certificate: choose one (a certificate of your own, one from Let's Encrypt for a public name, or a self-signed one)", strings.Join(ways, " and "))
	}
	if len(t.ACMEDomains) == 0 {
		if keys := t.acmeKeysSet(); len(keys) > 0 {
			bad("tls: %s without acme_domains: list the public host names to get certificates for, e.g. acme_domains = [\"notes.example.org\"]", strings.Join(keys, ", "))
		}
	}
	if len(t.SelfSignedNames) > 0 && !t.SelfSigned {
		bad("tls: self_signed_names without self_signed = true")
	}
	seen := map[string]bool{}
	for _, d := range t.ACMEDomains {
		if err := checkACMEDomain(d); err != nil {
			bad("tls: acme_domains: %v", err)
		} else if seen[strings.ToLower(d)] {
			bad("tls: acme_domains: %q is listed twice", d)
		}
		seen[strings.ToLower(d)] = true
	}
	if t.ACMEEmail != "" && (!strings.Contains(t.ACMEEmail, "@") || strings.ContainsAny(t.ACMEEmail, " ,<>")) {
		bad("tls: acme_email %q: want one address, e.g. admin@example.org", t.ACMEEmail)
	}
	if t.ACMEDirectory != "" {
		if u, err := url.Parse(t.ACMEDirectory); err != nil || u.Scheme != "https" || u.Host == "" {
			bad("tls: acme_directory %q: want the https:// URL of an ACME directory (default %s)", t.ACMEDirectory, autocert.DefaultACMEDirectory)
		}
	}
	if t.ACMEHTTPListen != "" {
		if _, _, err := splitListen(t.ACMEHTTPListen); err != nil {
			bad("tls: acme_http_listen: %v (e.g. \":80\", where the CA checks HTTP-01 challenges)", err)
		}
	}
	for _, n := range t.SelfSignedNames {
		if net.ParseIP(n) == nil && !validHostName(n) {
			bad("tls: self_signed_names: %q is neither a host name nor an IP address", n)
		}
	}
}

// checkACMEDomain refuses what an ACME CA cannot issue for through the
// challenges the relay answers (TLS-ALPN-01, HTTP-01).
func checkACMEDomain(d string) error {
	switch {
	case strings.Contains(d, "://") || strings.Contains(d, "/"):
		return fmt.Errorf("%q: give the host name alone, without scheme or path", d)
	case strings.Contains(d, "*"):
		return fmt.Errorf("%q: wildcard names need the DNS-01 challenge, which the relay does not answer: list each name", d)
	case net.ParseIP(d) != nil:
		return fmt.Errorf("%q is an IP address: a public CA certifies host names (use self_signed for an address)", d)
	case strings.Contains(d, ":"):
		return fmt.Errorf("%q: give the host name without a port", d)
	case !validHostName(d) || !strings.Contains(d, "."):
		return fmt.Errorf("%q is not a public host name (e.g. notes.example.org)", d)
	}
	return nil
}

// validHostName checks a DNS host name: labels of letters, digits and
// inner hyphens.
func validHostName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, l := range strings.Split(h, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// tlsSettings are the resolved ACME and self-signed settings (the
// certificate files are settings.tlsCert and tlsKey).
type tlsSettings struct {
	acme *acmeSettings
	// selfSigned: make (once) and serve a self-signed certificate.
	selfSigned bool
	// selfSignedNames are names it must cover besides the defaults.
	selfSignedNames []string
}

// acmeSettings say where and for which names certificates are obtained.
type acmeSettings struct {
	domains    []string
	email      string
	directory  string
	caFile     string // PEM roots the directory's HTTPS is checked with ("" = the system's)
	httpListen string // "" = no HTTP-01 listener
}

// tlsOn reports that the relay serves HTTPS itself.
func (s *settings) tlsOn() bool {
	return s.tlsCert != "" || s.tls.acme != nil || s.tls.selfSigned
}

// resolveTLS resolves the ACME and self-signed settings (the flag
// --tls-self-signed is [tls] self_signed = true); both keep their files
// in the data folder, so a relay that has none cannot use them.
func resolveTLS(fc *fileConfig, fl flagValues, s *settings) (tlsSettings, error) {
	t := fc.TLS
	var ts tlsSettings
	if fl.tlsSelfSigned {
		if t.CertFile != "" || len(t.ACMEDomains) > 0 {
			return ts, usageError{"--tls-self-signed: the configuration's [tls] already gives a certificate (cert_file or acme_domains): drop one of them"}
		}
		t.SelfSigned = true
		if s.p2pSelfNostr() {
			return ts, usageError{"--tls-self-signed: a p2p group or LiveSync P2P room signals on this relay's own /_nostr (\"self\", the default), which the relay reaches over loopback and would not trust with a self-signed certificate: list public Nostr relays in the configuration, or leave --tls-self-signed out"}
		}
	}
	if len(t.ACMEDomains) == 0 && !t.SelfSigned {
		return ts, nil
	}
	if s.noDataDir() {
		what := "acme_domains"
		if t.SelfSigned {
			what = "self_signed"
		}
		return ts, usageError{"tls: " + what + " keeps its certificate in the data folder, but every database is kept on CouchDB, so the relay has no data folder: give cert_file and key_file instead"}
	}
	if t.SelfSigned {
		ts.selfSigned, ts.selfSignedNames = true, t.SelfSignedNames
		return ts, nil
	}
	a := &acmeSettings{email: strings.TrimPrefix(t.ACMEEmail, "mailto:"), directory: t.ACMEDirectory, caFile: fc.resolvePath(t.ACMECAFile), httpListen: t.ACMEHTTPListen}
	for _, d := range t.ACMEDomains {
		a.domains = append(a.domains, strings.ToLower(d))
	}
	if a.directory == "" {
		a.directory = autocert.DefaultACMEDirectory
	}
	ts.acme = a
	return ts, nil
}

// acmeCacheDir is where the ACME account key and certificates are kept.
func (s *settings) acmeCacheDir() string { return filepath.Join(s.dataDir, tlsCacheDir) }

// selfSignedDir is where the self-signed certificate and key are kept.
func (s *settings) selfSignedDir() string { return filepath.Join(s.dataDir, tlsSelfSignedDir) }

// p2pSelfNostr reports a p2p group or LiveSync P2P room that signals on
// the relay's own /_nostr.
func (s *settings) p2pSelfNostr() bool {
	for _, g := range s.p2p.groups {
		if slices.Contains(g.relays, selfNostr) {
			return true
		}
	}
	for _, r := range s.p2p.livesync {
		if slices.Contains(r.relays, selfNostr) {
			return true
		}
	}
	return false
}
