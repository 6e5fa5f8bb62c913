package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/livesync-go/livesync-go/adapters/folder"
)

const (
	selfSignedCertFile = "self-signed-cert.pem"
	selfSignedKeyFile  = "self-signed-key.pem"
	// selfSignedValidity is what Apple's systems accept for a server
	// certificate trusted by a root the user added (825 days).
	selfSignedValidity = 825 * 24 * time.Hour
	// selfSignedRenewBefore: a certificate expiring sooner is replaced at
	// start, so a running relay does not serve an expired one.
	selfSignedRenewBefore = 7 * 24 * time.Hour
)

// selfSignedCert is the relay's self-signed certificate.
type selfSignedCert struct {
	cert     tls.Certificate
	leaf     *x509.Certificate
	certPath string
	created  bool   // made at this start
	why      string // why it was made: "none yet", "expired", ...
}

// fingerprint is the SHA-256 of the certificate (DER), as browsers and
// openssl x509 -fingerprint -sha256 show it: uppercase hex pairs joined
// by colons.
func fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	parts := make([]string, len(sum))
	for i, b := range sum {
		parts[i] = fmt.Sprintf("%02X", b)
	}
	return strings.Join(parts, ":")
}

// selfSignedNames are the names the certificate covers: the listen
// host, localhost and the loopback addresses, the machine's host name,
// the configured extra names and, when the relay listens on every
// interface, the machine's addresses (so a LAN client can connect by
// address). required are the names whose absence from a kept
// certificate makes a new one (interface addresses and the host name
// change and are not required, so the fingerprint stays).
func selfSignedNames(listenHost string, extra []string) (all, required []string) {
	add := func(list *[]string, n string) {
		n = strings.ToLower(strings.Trim(n, "[]"))
		if n != "" && !slices.Contains(*list, n) {
			*list = append(*list, n)
		}
	}
	for _, n := range []string{"localhost", "127.0.0.1", "::1"} {
		add(&required, n)
	}
	ip := net.ParseIP(listenHost)
	if listenHost != "" && (ip == nil || !ip.IsUnspecified()) {
		add(&required, listenHost)
	}
	for _, n := range extra {
		add(&required, n)
	}
	all = append(all, required...)
	if h, err := os.Hostname(); err == nil && validHostName(h) {
		add(&all, h)
	}
	if listenHost == "" || (ip != nil && ip.IsUnspecified()) {
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if in, ok := a.(*net.IPNet); ok && !in.IP.IsLoopback() && !in.IP.IsLinkLocalUnicast() {
					add(&all, in.IP.String())
				}
			}
		}
	}
	return all, required
}

// loadOrCreateSelfSigned returns the certificate kept in dir, or makes
// one (a new ECDSA P-256 key) when there is none, it cannot be read, it
// expires within selfSignedRenewBefore or it misses a required name.
func loadOrCreateSelfSigned(dir string, all, required []string, now time.Time) (*selfSignedCert, error) {
	certPath, keyPath := filepath.Join(dir, selfSignedCertFile), filepath.Join(dir, selfSignedKeyFile)
	why := "none yet"
	if c, err := tls.LoadX509KeyPair(certPath, keyPath); err == nil {
		leaf := c.Leaf
		switch missing := missingName(leaf, required); {
		case now.Add(selfSignedRenewBefore).After(leaf.NotAfter):
			why = "the kept one expires " + leaf.NotAfter.UTC().Format(time.DateOnly)
		case missing != "":
			why = "the kept one does not name " + missing
		default:
			return &selfSignedCert{cert: c, leaf: leaf, certPath: certPath}, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		why = "the kept one cannot be read (" + err.Error() + ")"
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("tls: self-signed certificate: %w", err)
	}
	certPEM, keyPEM, err := makeSelfSigned(all, now)
	if err != nil {
		return nil, fmt.Errorf("tls: making a self-signed certificate: %w", err)
	}
	// The key first: a certificate is never kept without its key.
	if err := folder.WriteAtomic(keyPath, keyPEM, 0o600); err != nil {
		return nil, fmt.Errorf("tls: self-signed certificate: %w", err)
	}
	if err := folder.WriteAtomic(certPath, certPEM, 0o644); err != nil {
		return nil, fmt.Errorf("tls: self-signed certificate: %w", err)
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("tls: self-signed certificate: %w", err)
	}
	return &selfSignedCert{cert: c, leaf: c.Leaf, certPath: certPath, created: true, why: why}, nil
}

// missingName is the first of names the certificate does not cover, or "".
func missingName(leaf *x509.Certificate, names []string) string {
	for _, n := range names {
		if leaf.VerifyHostname(n) != nil {
			return n
		}
	}
	return ""
}

// makeSelfSigned makes a key and a certificate for names (host names
// and IP addresses), valid from an hour ago (clock skew) for
// selfSignedValidity, for a TLS server only (not a CA), in PEM.
func makeSelfSigned(names []string, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	host, _ := os.Hostname()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "livesync-relay on " + host, Organization: []string{"livesync-relay (self-signed)"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(selfSignedValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), nil
}
