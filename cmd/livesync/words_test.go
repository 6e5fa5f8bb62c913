package main

import (
	"encoding/pem"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// goWords finds what a user of the CLI cannot act on in a message: a Go
// field path ("Config.SecretKey") or an UpperCamelCase Go identifier
// ("AllowJoin", "HandshakeOptions", "CACertPEM"). The CLI's own words are
// flags, URL parts, environment variables and configuration keys.
var goWords = regexp.MustCompile(`\b[A-Za-z]+\.[A-Z][A-Za-z]+\b|\b[A-Z]+[a-z0-9]+[A-Z][A-Za-z0-9]*\b`)

// productNames are CamelCase words that are names, not Go identifiers.
var productNames = map[string]bool{"LiveSync": true, "CouchDB": true, "PouchDB": true, "MinIO": true, "KiB": true, "MiB": true, "GiB": true}

// goWordsIn returns the Go-looking words of a message. Words after "s3:"
// are S3 policy actions (s3:GetObject), which a user grants by that name.
func goWordsIn(msg string) []string {
	var bad []string
	for _, loc := range goWords.FindAllStringIndex(msg, -1) {
		w := msg[loc[0]:loc[1]]
		if productNames[w] || strings.HasSuffix(msg[:loc[0]], "s3:") {
			continue
		}
		bad = append(bad, w)
	}
	return bad
}

// TestMessagesUseTheCLIsWords scans the string literals of the CLI and of
// the adapters whose errors reach its user, and fails on Go field paths
// and identifiers. It skips what is not a message: imports, struct tags,
// constants, map keys, and literals compared against (S3 error codes,
// cookie names).
func TestMessagesUseTheCLIsWords(t *testing.T) {
	for _, dir := range []string{".", "../../adapters/minio", "../../adapters/couchdb"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v)", dir, err)
		}
		fset := token.NewFileSet()
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, lit := range messageLiterals(f) {
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				if bad := goWordsIn(s); bad != nil {
					t.Errorf("%s: %v in %q: name what the user sets (a flag, URL part, environment variable or configuration key)", fset.Position(lit.Pos()), bad, s)
				}
			}
		}
	}
}

// messageLiterals returns the string literals of f that may become text
// a user reads.
func messageLiterals(f *ast.File) []*ast.BasicLit {
	skip := map[ast.Expr]bool{}
	var out []*ast.BasicLit
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.ImportSpec, *ast.Field:
			return false
		case *ast.GenDecl:
			if n.Tok == token.CONST {
				return false
			}
		case *ast.KeyValueExpr:
			skip[n.Key] = true
		case *ast.BinaryExpr:
			if n.Op == token.EQL || n.Op == token.NEQ {
				skip[n.X], skip[n.Y] = true, true
			}
		case *ast.CaseClause:
			for _, e := range n.List {
				skip[e] = true
			}
		case *ast.BasicLit:
			if n.Kind == token.STRING && !skip[n] {
				out = append(out, n)
			}
		}
		return true
	})
	return out
}

// s3ErrorServer answers every request with one S3 error document.
func s3ErrorServer(t *testing.T, status int, code, region string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		if region != "" {
			w.Header().Set("x-amz-bucket-region", region)
		}
		w.WriteHeader(status)
		if r.Method != http.MethodHead {
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>refused</Message><Region>%s</Region><Resource>/vault</Resource><RequestId>1</RequestId></Error>`, code, region)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestBucketErrorsInTheCLIsWords drives the bucket adapter's errors a
// setting can fix through the CLI and checks that the line printed names
// the CLI's setting (the URL part, the environment variable, the
// configuration key), never the adapter's Go field.
func TestBucketErrorsInTheCLIsWords(t *testing.T) {
	host := func(srv *httptest.Server) string {
		return strings.TrimPrefix(strings.TrimPrefix(srv.URL, "https://"), "http://")
	}
	tlsSrv := httptest.NewUnstartedServer(http.NotFoundHandler())
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)
	dir := t.TempDir()
	notPEM, caPEM := filepath.Join(dir, "ca.txt"), filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(caPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsSrv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	plainSrv := s3ErrorServer(t, http.StatusNotFound, "NoSuchKey", "")
	for _, tc := range []struct {
		name string
		url  string
		code int
		want []string
	}{
		{"unknown access key", "s3://AK@" + host(s3ErrorServer(t, http.StatusForbidden, "InvalidAccessKeyId", "")) + "/vault/notes/?region=us-east-1",
			exitAuth, []string{"does not know the access key", "s3://ACCESS_KEY@", "access_key"}},
		{"wrong secret key", "s3://AK@" + host(s3ErrorServer(t, http.StatusForbidden, "SignatureDoesNotMatch", "")) + "/vault/notes/?region=us-east-1",
			exitAuth, []string{"secret key", "LIVESYNC_S3_SECRET_KEY", "--password-file", "secret_key_file"}},
		{"wrong region", "s3://AK@" + host(s3ErrorServer(t, http.StatusBadRequest, "AuthorizationHeaderMalformed", "eu-central-1")) + "/vault/notes/?region=us-east-1",
			exitAuth, []string{`region "eu-central-1"`, "?region=eu-central-1", `region = "eu-central-1"`}},
		{"untrusted certificate", "s3://AK@" + host(tlsSrv) + "/vault/notes/?region=us-east-1&tls=1",
			exitUnreachable, []string{"not trusted", "?ca-file=", "ca_file"}},
		{"HTTPS to a plain server", "s3://AK@" + host(plainSrv) + "/vault/notes/?region=us-east-1&tls=1",
			exitUnreachable, []string{"plain HTTP", "?tls=", "tls"}},
		{"CA file without a certificate", "s3://AK@" + host(tlsSrv) + "/vault/notes/?region=us-east-1&tls=1&ca-file=" + notPEM,
			exitUsage, []string{"no PEM certificate", "?ca-file=", "ca_file"}},
		{"CA file over plain HTTP", "s3://AK@" + host(plainSrv) + "/vault/notes/?region=us-east-1&ca-file=" + caPEM,
			exitUsage, []string{"HTTPS", "?tls=1"}},
		{"bad bucket name", "s3://AK@" + host(plainSrv) + "/v/notes/?region=us-east-1",
			exitUsage, []string{`bucket name "v"`, "s3://host/BUCKET/prefix/", "bucket in the configuration"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSession(t)
			s.env["LIVESYNC_S3_SECRET_KEY"] = "s3cr3t-never-shown"
			code, _, errs := s.run("", "pull", tc.url)
			if code != tc.code || strings.Count(errs, "\n") != 1 {
				t.Fatalf("exit %d, want %d; stderr %q", code, tc.code, errs)
			}
			for _, w := range tc.want {
				if !strings.Contains(errs, w) {
					t.Errorf("%q lacks %q", errs, w)
				}
			}
			if bad := goWordsIn(errs); bad != nil {
				t.Errorf("%q names Go identifiers %v", errs, bad)
			}
			if strings.Contains(errs, "s3cr3t") {
				t.Errorf("%q shows the secret key", errs)
			}
		})
	}
}

func TestGoWords(t *testing.T) {
	for msg, want := range map[string]string{
		"check the credentials (Config.SecretKey)":                         "Config.SecretKey",
		"fetch it again (then connect with AllowJoin)":                     "AllowJoin",
		"minio: handshake: NodeID is required":                             "NodeID",
		"give its CA certificate in CACertPEM":                             "CACertPEM",
		"a 5 MiB pack for PouchDB":                                         "",
		"set HandshakeOptions.Check":                                       "HandshakeOptions.Check",
		"a CouchDB or LiveSync vault; may s3:GetObject and s3:PutObject":   "",
		"the bucket URL (s3://ACCESS_KEY@host/bucket/), ?region=us-east-1": "",
	} {
		if got := strings.Join(goWordsIn(msg), " "); got != want {
			t.Errorf("goWordsIn(%q) = %q, want %q", msg, got, want)
		}
	}
}
