package main

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"syscall"

	bolt "go.etcd.io/bbolt"

	"github.com/livesync-go/livesync-go/adapters/couchdb"
	"github.com/livesync-go/livesync-go/adapters/minio"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/journal"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// remoteError names the remote an error came from, so that the one line
// printed for it says which remote failed.
type remoteError struct {
	remote string // the remote without credentials
	err    error
	bucket string // the bucket's name, for a journal bucket
}

func (e *remoteError) Error() string { return e.remote + ": " + e.err.Error() }
func (e *remoteError) Unwrap() error { return e.err }

// localError marks an error of the local replica (the bbolt file), as
// opposed to the remote's.
type localError struct {
	path string
	err  error
}

func (e *localError) Error() string { return e.path + ": " + e.err.Error() }
func (e *localError) Unwrap() error { return e.err }

// passphraseError says the vault's data cannot be decrypted with the
// passphrase given.
type passphraseError struct {
	remote string
	docID  string
	what   string // what docID names: "document" unless set ("pack")
}

func (e *passphraseError) Error() string {
	what := e.what
	if what == "" {
		what = "document"
	}
	if strings.HasPrefix(e.remote, "the local replica") {
		return fmt.Sprintf("the passphrase is not the one %s was written with (%s %q)", e.remote, what, e.docID)
	}
	return fmt.Sprintf("cannot decrypt %s (%s %q): the passphrase is wrong, or the remote was re-keyed with a new salt", e.remote, what, e.docID)
}

func (e *passphraseError) Unwrap() error { return engine.ErrDecrypt }

// classify maps an error to the exit code and the one line printed for
// it. The line never holds a password or passphrase: errors of the
// adapters never contain them, and URLs are printed without credentials.
func classify(err error) (int, string) {
	var ue usageError
	var pe partialError
	var le *localError
	var re *remoteError
	var ee *engine.Error
	var de *doctorError
	var lk *lockedError
	var se *minio.SettingError
	remote := ""
	if errors.As(err, &re) {
		remote = re.remote
	}
	var xe exitError
	switch {
	case errors.As(err, &de):
		return de.code, err.Error()
	case errors.As(err, &xe):
		return xe.code, xe.msg
	case errors.As(err, &lk):
		return exitRefused, prefix(remote) + lk.Error()
	case errors.As(err, &ue):
		return exitUsage, err.Error()
	case errors.As(err, &pe):
		return exitPartial, err.Error()
	case errors.Is(err, context.Canceled):
		return exitInterrupted, "interrupted; run the command again to continue where it stopped"
	case isDiskFull(err):
		where := "the disk"
		if errors.As(err, &le) {
			where = le.path
		}
		return exitLocal, fmt.Sprintf("%s: no space left on the device; free some space and run the command again (nothing written so far is lost)", where)
	case errors.Is(err, bolt.ErrTimeout) && errors.As(err, &le):
		return exitLocal, fmt.Sprintf("%s: the local replica is in use by another livesync process", le.path)
	case errors.As(err, &le):
		return exitLocal, fmt.Sprintf("%s: %s", le.path, innermost(le.err))
	case errors.Is(err, engine.ErrDecrypt):
		var pp *passphraseError
		if errors.As(err, &pp) {
			return exitPassphrase, pp.Error()
		}
		doc := ""
		if errors.As(err, &ee) && ee.DocID != "" {
			what := "document"
			if strings.HasSuffix(ee.DocID, journal.PackKeySuffix) {
				what = "pack"
			}
			doc = fmt.Sprintf(" (%s %q)", what, ee.DocID)
		}
		if remote == "" {
			return exitPassphrase, fmt.Sprintf("cannot decrypt the vault's data%s: the passphrase is wrong (or the data is damaged)", doc)
		}
		return exitPassphrase, fmt.Sprintf("%scannot decrypt the vault's data%s: the passphrase is wrong, or the remote was re-keyed with a new salt", prefix(remote), doc)
	case errors.Is(err, minio.ErrTLS) && errors.As(err, &se):
		return exitUnreachable, fmt.Sprintf("%scannot reach the bucket over TLS: %s", prefix(remote), bucketSettingMessage(se))
	case errors.Is(err, minio.ErrTLS):
		return exitUnreachable, fmt.Sprintf("%scannot reach the bucket over TLS: %s; %s", prefix(remote), s3Message(err), bucketSettingHint(minio.SettingCACert, ""))
	case errors.As(err, &ee) && ee.Stage == engine.StageAuth && re != nil && re.bucket != "" && errors.As(err, &se):
		return exitAuth, fmt.Sprintf("%sthe server refused the credentials: %s", prefix(remote), bucketSettingMessage(se))
	case errors.As(err, &ee) && ee.Stage == engine.StageAuth && re != nil && re.bucket != "":
		return exitAuth, fmt.Sprintf("%sthe server refused the credentials: %s; check the access key (the user part of the bucket URL, or access_key), the secret key ($LIVESYNC_S3_SECRET_KEY, --password-file, or secret_key_file), the key's rights on bucket %q, and the region (?region= in the bucket URL, or region)", prefix(remote), s3Message(err), re.bucket)
	case errors.As(err, &ee) && ee.Stage == engine.StageAuth:
		return exitAuth, fmt.Sprintf("%sthe server refused the user name or password (%s); check them, and the user's access to the database", prefix(remote), httpStatusOf(ee))
	case errors.As(err, &ee) && ee.Stage == engine.StageTransport:
		return exitUnreachable, fmt.Sprintf("%scannot reach the remote: %s", prefix(remote), transportCause(ee))
	}
	var tm *negotiate.TweakMismatchError
	switch {
	case errors.As(err, &tm):
		var diffs []string
		for _, d := range tm.Diffs {
			diffs = append(diffs, fmt.Sprintf("%s is %s there, %s here", d.Key, d.Preferred, d.Current))
		}
		return exitRefused, fmt.Sprintf("%sthe vault's settings differ from the remote's preferred ones: %s; use the remote's settings (remove the e2ee/obfuscate settings, or use a fresh --store) or rebuild the remote with these", prefix(remote), strings.Join(diffs, "; "))
	case errors.Is(err, negotiate.ErrNodeCleaned):
		return exitRefused, prefix(remote) + "the remote was cleaned up by another device and this device is not accepted yet; fetch everything again (pull --rebuild-local: the replica's documents are discarded, and the device joins), or unlock the remote (livesync unlock)"
	case errors.Is(err, negotiate.ErrNodeLocked):
		return exitRefused, prefix(remote) + "the remote is locked: another device rebuilt it and this device is not accepted yet; fetch it again (pull --rebuild-local: the replica's documents are discarded, and the device joins), or unlock it (livesync unlock)"
	case errors.Is(err, negotiate.ErrIncompatible):
		// Both the version document (a newer database format) and the
		// milestone's chunk ranges wrap ErrIncompatible.
		return exitRefused, prefix(remote) + "the remote is incompatible: a newer client wrote it, or its devices' chunk formats do not overlap; update livesync-go and the other devices"
	case errors.Is(err, minio.ErrNoBucket):
		name := ""
		if re != nil && re.bucket != "" {
			name = fmt.Sprintf(" %q", re.bucket)
		}
		return exitRefused, fmt.Sprintf("%sthe bucket%s does not exist: create it on the server (livesync never creates buckets), or fix the bucket name", prefix(remote), name)
	case errors.Is(err, negotiate.ErrMilestoneRace) && re != nil && re.bucket != "":
		return exitRefused, prefix(remote) + "other devices kept rewriting the bucket's milestone at the same moment; run the command again"
	case errors.Is(err, negotiate.ErrMilestoneRace):
		return exitRefused, prefix(remote) + "other devices kept rewriting the remote's milestone at the same moment; run the command again"
	case errors.Is(err, vault.ErrRekeyedMeanwhile):
		return exitRefused, prefix(remote) + rekeyedMeanwhile
	case errors.Is(err, vault.ErrNoVaultYet), errors.Is(err, vault.ErrNotAVault):
		return exitRefused, prefix(remote) + innermost(err)
	case errors.Is(err, couchdb.ErrNoDatabase):
		return exitRefused, prefix(remote) + "the database does not exist (push, sync or import create it)"
	}
	if remote != "" {
		return exitFailed, re.Error()
	}
	return exitFailed, err.Error()
}

func prefix(remote string) string {
	if remote == "" {
		return ""
	}
	return remote + ": "
}

// isDiskFull reports a write that failed because the device or quota is
// full.
func isDiskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// innermost returns the message of the deepest error in err's chain that
// still says something, keeping the operation of an *engine.Error.
func innermost(err error) string {
	var ee *engine.Error
	if errors.As(err, &ee) && ee.Err != nil {
		op := ee.Op
		if ee.DocID != "" {
			op += fmt.Sprintf(" %q", ee.DocID)
		}
		return fmt.Sprintf("%s: %v", op, ee.Err)
	}
	return err.Error()
}

// transportCause describes a network failure in a few words.
func transportCause(ee *engine.Error) string {
	var dns *net.DNSError
	var op *net.OpError
	var ue *url.Error
	var cert x509.UnknownAuthorityError
	var host x509.HostnameError
	switch {
	case errors.As(ee, &dns):
		return fmt.Sprintf("the host name %q cannot be resolved", dns.Name)
	case errors.As(ee, &cert):
		return "its TLS certificate is signed by an authority this machine does not trust"
	case errors.As(ee, &host):
		return "its TLS certificate is for another host name"
	case errors.As(ee, &op):
		if errors.Is(op, syscall.ECONNREFUSED) {
			return fmt.Sprintf("connection refused by %s (is the server running?)", op.Addr)
		}
		return op.Error()
	case errors.As(ee, &ue):
		return ue.Err.Error()
	}
	return ee.Err.Error()
}

// httpStatusOf returns "HTTP 401" and the like from an auth error.
func httpStatusOf(ee *engine.Error) string {
	msg := ee.Err.Error()
	if i := strings.Index(msg, "HTTP "); i >= 0 && len(msg) >= i+8 {
		return msg[i : i+8]
	}
	return "access denied"
}

// s3Message is the adapter's message of a bucket error without the
// package prefix ("minio: ").
func s3Message(err error) string {
	var ee *engine.Error
	if errors.As(err, &ee) && ee.Err != nil {
		err = ee.Err
	}
	return strings.TrimPrefix(err.Error(), "minio: ")
}

// bucketSettingMessage is the bucket adapter's description of a problem
// one setting can fix, followed by where this CLI takes that setting
// from.
func bucketSettingMessage(se *minio.SettingError) string {
	hint := bucketSettingHint(se.Setting, se.Want)
	if hint == "" {
		return se.Problem
	}
	return se.Problem + "; " + hint
}

// bucketSettingHint names, in this CLI's words, where a bucket setting
// comes from: the s3:// URL's parts and parameters, the [remote.NAME]
// keys of the configuration file, the environment and the flags. The
// adapter's errors name its own Config fields, which a user never sees.
// want is the value the server asked for, if it said ("" otherwise).
func bucketSettingHint(s minio.Setting, want string) string {
	switch s {
	case minio.SettingAccessKey:
		return "the access key is the user part of the bucket URL (s3://ACCESS_KEY@host/bucket/), or access_key in the configuration"
	case minio.SettingSecretKey:
		return "the secret key comes from $LIVESYNC_S3_SECRET_KEY, --password-file, or secret_key_file in the configuration"
	case minio.SettingRegion:
		if want != "" {
			return fmt.Sprintf("add ?region=%s to the bucket URL (or region = %q in the configuration), or leave the region out to have it asked from the server", url.QueryEscape(want), want)
		}
		return "check the region (?region= in the bucket URL, or region in the configuration) and the credentials"
	case minio.SettingCACert:
		return "trust the server's certificate authority with a PEM file: ?ca-file=PATH in the bucket URL, or ca_file in the configuration"
	case minio.SettingSecure:
		return "choose HTTPS or plain HTTP to match the server: ?tls=1 or ?tls=0 in the bucket URL, or tls (or an https:// or http:// endpoint) in the configuration"
	case minio.SettingEndpoint:
		return "the server is the host:port of the bucket URL, or endpoint in the configuration"
	case minio.SettingBucket:
		return "the bucket is the first part of the bucket URL's path (s3://host/BUCKET/prefix/), or bucket in the configuration"
	case minio.SettingPathStyle, minio.SettingVirtualHost:
		return "choose the addressing style with ?path-style=1 or ?virtual-host=1 in the bucket URL, or path_style or virtual_host in the configuration"
	}
	return ""
}

// bucketConfigError turns an error of the bucket adapter's configuration
// check (minio.New) into a usage error in this CLI's words.
func bucketConfigError(err error) error {
	var se *minio.SettingError
	if errors.As(err, &se) {
		return usageError{"the bucket's settings: " + bucketSettingMessage(se)}
	}
	return usageError{"the bucket's settings: " + s3Message(err)}
}

// writeJSON writes v as one line of JSON.
func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
