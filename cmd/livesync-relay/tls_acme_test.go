package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// acmeTestName is the relay's public name in the ACME test; a DNS server
// of the test's own sends Pebble to 127.0.0.1 for it.
const acmeTestName = "notes.relay.test"

// The relay obtains a certificate from an ACME CA (Pebble, validating
// the TLS-ALPN-01 challenge for real on the relay's own port), a client
// trusting the CA's root reaches it by name, and the next start serves
// the cached certificate with the CA gone.
func TestTLSACMEPebble(t *testing.T) {
	relayAddr := freeAddr(t)
	pb := startPebble(t, portOf(relayAddr), portOf(freeAddr(t)))
	dir := t.TempDir()
	cfg := filepath.Join(dir, "relay.toml")
	os.WriteFile(cfg, fmt.Appendf(nil, "[tls]\nacme_domains = [%q]\nacme_email = \"admin@example.org\"\nacme_directory = %q\nacme_ca_file = %q\n",
		acmeTestName, pb.directory, pb.caFile), 0o600)
	data := filepath.Join(dir, "data")
	args := []string{"--config", cfg, "--listen", relayAddr}

	rn := startAdmin(t, data, args...)
	wantURL := "https://" + acmeTestName + ":" + strings.Split(relayAddr, ":")[1]
	if rn.url != wantURL || !strings.Contains(rn.out.String(), "URI:            "+wantURL) {
		t.Fatalf("url %s, want %s; output:\n%s", rn.url, wantURL, rn.out)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pb.root(t)) {
		t.Fatal("no root from Pebble")
	}
	first := acmeGet(t, rn, roots)
	if first.Issuer.CommonName == "" || !strings.Contains(first.Issuer.CommonName, "Pebble") {
		t.Fatalf("issuer %v", first.Issuer)
	}
	waitForOutput(t, rn.out, "TLS: certificate ready")
	rn.stop()
	pb.stop(t)

	rn = startAdmin(t, data, args...)
	again := acmeGet(t, rn, roots)
	if !again.Equal(first) {
		t.Fatalf("second start serves another certificate (serial %v, first %v)", again.SerialNumber, first.SerialNumber)
	}
	waitForOutput(t, rn.out, "TLS: certificate ready")
	if strings.Contains(rn.out.String(), "no certificate yet") {
		t.Fatalf("second start:\n%s", rn.out)
	}
}

// With acme_http_listen, the relay answers HTTP-01 challenges there
// (here the only way: the CA checks TLS-ALPN-01 on a port where nothing
// listens) and redirects other requests to HTTPS.
func TestTLSACMEHTTP01(t *testing.T) {
	relayAddr, httpAddr := freeAddr(t), freeAddr(t)
	pb := startPebble(t, portOf(freeAddr(t)), portOf(httpAddr))
	dir := t.TempDir()
	cfg := filepath.Join(dir, "relay.toml")
	os.WriteFile(cfg, fmt.Appendf(nil, "[tls]\nacme_domains = [%q]\nacme_directory = %q\nacme_ca_file = %q\nacme_http_listen = %q\n",
		acmeTestName, pb.directory, pb.caFile, httpAddr), 0o600)
	rn := startAdmin(t, filepath.Join(dir, "data"), "--config", cfg, "--listen", relayAddr)
	if strings.Contains(rn.out.String(), "forward port 443") {
		t.Errorf("the banner asks for port 443 with an HTTP-01 listener:\n%s", rn.out)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pb.root(t))
	acmeGet(t, rn, roots)

	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest("POST", "http://"+httpAddr+"/vault/_bulk_docs?x=1", strings.NewReader("{}"))
	req.Host = acmeTestName
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if want := rn.url + "/vault/_bulk_docs?x=1"; resp.StatusCode != http.StatusPermanentRedirect || resp.Header.Get("Location") != want {
		t.Fatalf("plain HTTP: %d to %q, want 308 to %q", resp.StatusCode, resp.Header.Get("Location"), want)
	}
}

// acmeGet asks for GET / by the relay's public name, trusting roots only,
// and returns the certificate served.
func acmeGet(t *testing.T, rn *running, roots *x509.CertPool) *x509.Certificate {
	t.Helper()
	addr := rn.r.ln.Addr().String()
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 2 * time.Minute}
	resp, err := client.Get(rn.url + "/")
	if err != nil {
		t.Fatalf("GET %s/: %v; output:\n%s", rn.url, err, rn.out)
	}
	defer resp.Body.Close()
	var welcome struct {
		CouchDB string `json:"couchdb"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&welcome); err != nil || resp.StatusCode != 200 || welcome.CouchDB != "Welcome" {
		t.Fatalf("GET /: %d %v %+v", resp.StatusCode, err, welcome)
	}
	return resp.TLS.PeerCertificates[0]
}

// waitForOutput waits until the output has s.
func waitForOutput(t *testing.T, out *syncBuffer, s string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(out.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the output:\n%s", s, out)
		}
		time.Sleep(20 * time.Millisecond) // polling the relay's log, not waiting for time to pass
	}
}

// pebble is a running Pebble (an ACME test CA).
type pebble struct {
	cmd       *exec.Cmd
	out       *syncBuffer
	done      chan struct{}
	directory string // its ACME directory URL
	mgmt      string // its management API
	caFile    string // the root of its HTTPS (not of the certificates it issues)
}

// freeAddr is a loopback address with a port nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func portOf(addr string) int {
	_, p, _ := net.SplitHostPort(addr)
	var n int
	fmt.Sscan(p, &n)
	return n
}

// startPebble builds Pebble (the go tool in go.mod), starts it with a
// DNS server that resolves every name to 127.0.0.1 and waits for its
// directory. It validates TLS-ALPN-01 challenges on tlsPort and HTTP-01
// ones on httpPort of 127.0.0.1. A build failure fails the test.
func startPebble(t *testing.T, tlsPort, httpPort int) *pebble {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command builds Pebble: %v", err)
	}
	modDir, err := exec.Command(goBin, "list", "-m", "-f", "{{.Dir}}", "github.com/letsencrypt/pebble/v2").Output()
	if err != nil {
		t.Fatalf("go list -m pebble: %v", err)
	}
	src := strings.TrimSpace(string(modDir))
	bin := filepath.Join(t.TempDir(), "pebble")
	if out, err := exec.Command(goBin, "build", "-o", bin, "github.com/letsencrypt/pebble/v2/cmd/pebble").CombinedOutput(); err != nil {
		t.Fatalf("building pebble: %v\n%s", err, out)
	}
	dns := startLoopbackDNS(t)
	pb := &pebble{out: &syncBuffer{}, done: make(chan struct{}), caFile: filepath.Join(src, "test", "certs", "pebble.minica.pem")}
	listen, mgmt := freeAddr(t), freeAddr(t)
	pb.directory, pb.mgmt = "https://"+listen+"/dir", "https://"+mgmt
	conf := map[string]any{"pebble": map[string]any{
		"listenAddress": listen, "managementListenAddress": mgmt,
		"certificate": filepath.Join(src, "test", "certs", "localhost", "cert.pem"),
		"privateKey":  filepath.Join(src, "test", "certs", "localhost", "key.pem"),
		"httpPort":    httpPort, "tlsPort": tlsPort,
		"ocspResponderURL": "", "externalAccountBindingRequired": false,
	}}
	b, _ := json.Marshal(conf)
	confFile := filepath.Join(t.TempDir(), "pebble.json")
	os.WriteFile(confFile, b, 0o600)
	pb.cmd = exec.Command(bin, "-config", confFile, "-dnsserver", dns)
	pb.cmd.Env = append(os.Environ(), "PEBBLE_VA_NOSLEEP=1", "PEBBLE_WFE_NONCEREJECT=0")
	pb.cmd.Stdout, pb.cmd.Stderr = pb.out, pb.out
	if err := pb.cmd.Start(); err != nil {
		t.Fatalf("starting pebble: %v", err)
	}
	go func() { pb.cmd.Wait(); close(pb.done) }()
	t.Cleanup(func() {
		pb.stop(t)
		if t.Failed() {
			t.Logf("pebble's output:\n%s", pb.out)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := pb.get(pb.directory); err == nil {
			return pb
		} else if time.Now().After(deadline) {
			t.Fatalf("pebble did not start: %v\n%s", err, pb.out)
		}
		select {
		case <-pb.done:
			t.Fatalf("pebble exited:\n%s", pb.out)
		case <-time.After(50 * time.Millisecond): // polling a child process's start
		}
	}
}

// get fetches a URL of Pebble's, trusting its HTTPS root.
func (pb *pebble) get(url string) ([]byte, error) {
	pemBytes, err := os.ReadFile(pb.caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemBytes)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := client.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return io.ReadAll(resp.Body)
}

// root is the root certificate (PEM) of what Pebble issues.
func (pb *pebble) root(t *testing.T) []byte {
	t.Helper()
	b, err := pb.get(pb.mgmt + "/roots/0")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (pb *pebble) stop(t *testing.T) {
	if pb.cmd.Process == nil {
		return
	}
	pb.cmd.Process.Kill()
	select {
	case <-pb.done:
	case <-time.After(10 * time.Second):
		t.Errorf("pebble did not exit")
	}
}

// startLoopbackDNS answers every A question with 127.0.0.1 and every
// other question with no answer, over TCP (Pebble's custom resolver
// asks over TCP), and returns its address.
func startLoopbackDNS(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				for {
					var n uint16
					if binary.Read(conn, binary.BigEndian, &n) != nil {
						return
					}
					q := make([]byte, n)
					if _, err := io.ReadFull(conn, q); err != nil {
						return
					}
					resp := loopbackDNSAnswer(q)
					if resp == nil {
						return
					}
					conn.Write(binary.BigEndian.AppendUint16(nil, uint16(len(resp))))
					conn.Write(resp)
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// loopbackDNSAnswer answers one DNS query (one question, RFC 1035).
func loopbackDNSAnswer(q []byte) []byte {
	if len(q) < 12 || binary.BigEndian.Uint16(q[4:]) != 1 {
		return nil
	}
	i := 12
	for i < len(q) && q[i] != 0 { // the question's name, label by label
		i += int(q[i]) + 1
	}
	if i+5 > len(q) {
		return nil
	}
	question := q[12 : i+5]
	qtype := binary.BigEndian.Uint16(q[i+1:])
	var b bytes.Buffer
	b.Write(q[:2])                    // id
	b.Write([]byte{0x81, 0x80, 0, 1}) // a response, recursion available, NOERROR; one question
	ancount := uint16(0)
	if qtype == 1 {
		ancount = 1
	}
	binary.Write(&b, binary.BigEndian, [3]uint16{ancount, 0, 0})
	b.Write(question)
	if qtype == 1 {
		b.Write([]byte{0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 127, 0, 0, 1}) // the name (pointer), A, IN, TTL 60, 127.0.0.1
	}
	return b.Bytes()
}
