package minio

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/journal"
	"github.com/livesync-go/livesync-go/engine/journalsync"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/negotiate/doctor"
	"github.com/livesync-go/livesync-go/engine/vault"
)

// Doctor examines the bucket without writing to it, in the order a
// journal sync meets the problems: the server, the credentials, the
// bucket, its packs, the salt, the milestone and the passphrase. A check
// whose failure makes the next ones meaningless ends the run; complete
// reports that every check ran, so a caller may add its own (what its
// local replica set aside).
func (b *Bucket) Doctor(ctx context.Context, o doctor.Options) (findings []vault.Finding, complete bool) {
	d := &bucketDoctor{b: b, f: doctor.New(o)}
	complete = d.run(ctx)
	return d.f.List, complete
}

type bucketDoctor struct {
	b *Bucket
	f *doctor.Findings
}

func (d *bucketDoctor) run(ctx context.Context) bool {
	keys, ok := d.checkAccess(ctx)
	if !ok {
		return false
	}
	salt, ok := d.checkSalt(ctx)
	if !ok {
		return false
	}
	raw, err := d.b.GetMilestone(ctx)
	settings, ok := d.f.Milestone(raw, err, negotiate.JournalChunkRange)
	if !ok {
		return false
	}
	d.checkPassphrase(ctx, settings, salt, len(keys))
	return true
}

// message is an error's message without the package prefix.
func message(err error) string {
	var ee *engine.Error
	if errors.As(err, &ee) && ee.Err != nil {
		err = ee.Err
	}
	return strings.TrimPrefix(err.Error(), "minio: ")
}

// checkAccess lists the packs: the listing tells whether the server
// answers, accepts the credentials and has the bucket.
func (d *bucketDoctor) checkAccess(ctx context.Context) ([]string, bool) {
	f, codes := d.f, d.f.O.Codes
	keys, err := d.b.List(ctx, "")
	var ee *engine.Error
	switch {
	case err == nil:
	case errors.Is(err, ErrTLS):
		f.Problem("server", codes.Unreachable, "cannot set up TLS with "+d.b.endpointURL+": "+message(err),
			"trust the server's certificate with ca_file (or ?ca-file= in the URL), or set tls to what the server speaks")
		return nil, false
	case errors.As(err, &ee) && ee.Stage == engine.StageTransport:
		f.Problem("server", codes.Unreachable, "cannot reach "+d.b.endpointURL+": "+f.Cause(ee),
			"check the endpoint (host, port, tls), that the server is running, and that this machine can reach it")
		return nil, false
	case errors.As(err, &ee) && ee.Stage == engine.StageAuth:
		f.OK("server", "reachable: "+d.b.endpointURL)
		f.Problem("credentials", codes.Auth, "the server refused the credentials: "+message(err),
			"check the access key and the secret key ($LIVESYNC_S3_SECRET_KEY, --password-file, secret_key_file), the key's rights on the bucket, and the region")
		return nil, false
	case errors.Is(err, ErrNoBucket):
		f.OK("server", "reachable: "+d.b.endpointURL)
		d.okCredentials()
		f.Problem("bucket", codes.Refused, fmt.Sprintf("the bucket %q does not exist", d.b.bucket),
			"create it on the server (livesync never creates buckets), or fix the bucket name")
		return nil, false
	default:
		code, msg := f.Explain(err)
		f.Problem("bucket", code, "listing the bucket failed: "+msg, "")
		return nil, false
	}
	f.OK("server", "reachable: "+d.b.endpointURL)
	d.okCredentials()
	f.OK("bucket", fmt.Sprintf("%q exists", d.b.bucket))
	where := "at the bucket's root"
	if d.b.prefix != "" {
		where = fmt.Sprintf("under the prefix %q", d.b.prefix)
	}
	if len(keys) == 0 {
		f.OK("packs", "no journal packs "+where+" yet")
		return keys, true
	}
	msg := fmt.Sprintf("%d journal %s %s", len(keys), plural(len(keys), "pack", "packs"), where)
	if ms, ok := journal.ParsePackKey(d.b.prefix, keys[len(keys)-1]); ok {
		msg += fmt.Sprintf("; the newest was written %s", time.UnixMilli(ms).Local().Format("2006-01-02 15:04:05"))
	}
	f.OK("packs", msg)
	return keys, true
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func (d *bucketDoctor) okCredentials() {
	if d.b.accessKey == "" {
		d.f.OK("credentials", "anonymous requests are accepted")
		return
	}
	d.f.OK("credentials", fmt.Sprintf("the access key %q is accepted", d.b.accessKey))
}

// checkSalt reads the sync-parameters object (never encrypted).
func (d *bucketDoctor) checkSalt(ctx context.Context) ([]byte, bool) {
	f := d.f
	p, err := d.b.GetSyncParameters(ctx)
	switch {
	case errors.Is(err, engine.ErrNotFound):
		f.OK("salt", "no sync parameters yet: the vault is new, and the first sync creates its salt")
		return nil, true
	case err != nil:
		code, msg := f.Explain(err)
		f.Problem("salt", code, "the sync parameters could not be read: "+msg,
			"restore "+negotiate.JournalSyncParametersKey+" from a backup of the bucket; a new salt would make the vault's packs unreadable")
		return nil, false
	}
	salt, err := p.Salt()
	if errors.Is(err, negotiate.ErrNoSalt) {
		f.OK("salt", "the sync parameters have no salt yet: the first sync creates it")
		return nil, true
	}
	if err != nil {
		f.Problem("salt", f.O.Codes.Refused, "the sync parameters hold an unreadable salt: "+err.Error(),
			"restore "+negotiate.JournalSyncParametersKey+" from a backup of the bucket")
		return nil, false
	}
	f.OK("salt", fmt.Sprintf("the vault's salt is there (protocol version %d)", p.ProtocolVersion))
	return salt, true
}

// checkPassphrase opens the newest packs with the passphrase.
func (d *bucketDoctor) checkPassphrase(ctx context.Context, s livesync.Settings, salt []byte, packs int) {
	f := d.f
	if !s.Encrypt {
		f.OK("passphrase", "not needed to open the packs: the vault is not encrypted")
		return
	}
	pass, err := f.Passphrase()
	if err != nil {
		f.Skipped("passphrase", "the vault is encrypted and no passphrase was given, so its packs were not opened",
			"set LIVESYNC_PASSPHRASE or use --passphrase-file to check it")
		return
	}
	if salt == nil || packs == 0 {
		f.OK("passphrase", "nothing to check yet: the bucket holds no encrypted pack")
		return
	}
	s.Passphrase = pass
	cipher, err := journalsync.CipherFor(s, salt)
	if err != nil {
		f.Problem("passphrase", f.O.Codes.Failed, err.Error(), "")
		return
	}
	opened, err := d.b.CheckPassphrase(ctx, cipher)
	switch {
	case err == nil && opened:
		f.OK("passphrase", "the newest pack opens with this passphrase")
	case err == nil:
		f.Warn("passphrase", "the newest packs do not open, for another reason than the passphrase (damaged or not LiveSync packs)",
			"pull to see which packs are set aside (livesync status lists them)")
	case errors.Is(err, engine.ErrDecrypt):
		f.Problem("passphrase", f.O.Codes.Passphrase, "the newest packs do not decrypt: the passphrase is wrong, or the bucket's salt was reset after they were written",
			"check the passphrase ($LIVESYNC_PASSPHRASE, --passphrase-file, the passphrase_file of the configuration); if it is right, the bucket must be rebuilt from a device that has the whole vault")
	default:
		code, msg := f.Explain(err)
		f.Problem("passphrase", code, "the packs could not be read: "+msg, "")
	}
}

// CheckPassphrase opens one of the newest packs (up to three, in case one
// is damaged) with cipher: a wrong passphrase opens none, and the error
// wraps engine.ErrDecrypt and names the pack. Packs that fail for
// another reason say nothing either way (opened false, no error); a
// transport or authentication failure is returned.
func (b *Bucket) CheckPassphrase(ctx context.Context, cipher journal.Cipher) (opened bool, err error) {
	keys, err := b.List(ctx, "")
	if err != nil {
		return false, err
	}
	const probes = 3
	var failed error
	for i := len(keys) - 1; i >= 0 && i >= len(keys)-probes; i-- {
		_, err := b.GetPack(ctx, keys[i], cipher)
		var ee *engine.Error
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, engine.ErrDecrypt):
			failed = &engine.Error{Op: "check passphrase", DocID: keys[i], Stage: engine.StageDecrypt, Err: err}
		case errors.Is(err, engine.ErrNotFound):
		case errors.As(err, &ee) && (ee.Stage == engine.StageTransport || ee.Stage == engine.StageAuth):
			return false, err
		}
	}
	return false, failed
}
