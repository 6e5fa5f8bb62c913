package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/livesync-go/livesync-go/adapters/minio"
	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/journal"
	"github.com/livesync-go/livesync-go/engine/livesync"
	"github.com/livesync-go/livesync-go/engine/negotiate"
)

// runBucket examines a journal bucket without writing to it, in the
// order a journal sync meets the problems: the server, the credentials,
// the bucket, its packs, the salt, the milestone, the passphrase, and
// what the local replica set aside.
func (d *doctor) runBucket(ctx context.Context) {
	keys, ok := d.checkBucketAccess(ctx)
	if !ok {
		return
	}
	salt, ok := d.checkBucketSalt(ctx)
	if !ok {
		return
	}
	raw, err := d.bucket.GetMilestone(ctx)
	settings, ok := d.judgeMilestone(ctx, raw, err, negotiate.JournalChunkRange)
	if !ok {
		return
	}
	d.checkBucketPassphrase(ctx, settings, salt, len(keys))
	d.checkQuarantine(ctx)
}

// endpointURL is the bucket's server as a URL.
func (d *doctor) endpointURL() string {
	if d.spec.s3.tls {
		return "https://" + d.spec.s3.endpoint
	}
	return "http://" + d.spec.s3.endpoint
}

// checkBucketAccess lists the packs: the listing tells whether the
// server answers, accepts the credentials and has the bucket.
func (d *doctor) checkBucketAccess(ctx context.Context) ([]string, bool) {
	s := d.spec.s3
	keys, err := d.bucket.List(ctx, "")
	var ee *engine.Error
	switch {
	case err == nil:
	case errors.Is(err, minio.ErrTLS):
		d.problem("server", exitUnreachable, "cannot set up TLS with "+d.endpointURL()+": "+s3Message(err),
			"trust the server's certificate with ca_file (or ?ca-file= in the URL), or set tls to what the server speaks")
		return nil, false
	case errors.As(err, &ee) && ee.Stage == engine.StageTransport:
		d.problem("server", exitUnreachable, "cannot reach "+d.endpointURL()+": "+transportCause(ee),
			"check the endpoint (host, port, tls), that the server is running, and that this machine can reach it")
		return nil, false
	case errors.As(err, &ee) && ee.Stage == engine.StageAuth:
		d.ok("server", "reachable: "+d.endpointURL())
		d.problem("credentials", exitAuth, "the server refused the credentials: "+s3Message(err),
			"check the access key and the secret key ($LIVESYNC_S3_SECRET_KEY, --password-file, secret_key_file), the key's rights on the bucket, and the region")
		return nil, false
	case errors.Is(err, minio.ErrNoBucket):
		d.ok("server", "reachable: "+d.endpointURL())
		d.okCredentials()
		d.problem("bucket", exitRefused, fmt.Sprintf("the bucket %q does not exist", s.bucket),
			"create it on the server (livesync never creates buckets), or fix the bucket name")
		return nil, false
	default:
		code, msg := classify(err)
		d.problem("bucket", code, "listing the bucket failed: "+msg, "")
		return nil, false
	}
	d.ok("server", "reachable: "+d.endpointURL())
	d.okCredentials()
	d.ok("bucket", fmt.Sprintf("%q exists", s.bucket))
	where := "at the bucket's root"
	if s.prefix != "" {
		where = fmt.Sprintf("under the prefix %q", s.prefix)
	}
	if len(keys) == 0 {
		d.ok("packs", "no journal packs "+where+" yet")
		return keys, true
	}
	msg := fmt.Sprintf("%d journal %s %s", len(keys), plural(len(keys), "pack", "packs"), where)
	if ms, ok := journal.ParsePackKey(d.bucket.Prefix(), keys[len(keys)-1]); ok {
		msg += fmt.Sprintf("; the newest was written %s", time.UnixMilli(ms).Local().Format("2006-01-02 15:04:05"))
	}
	d.ok("packs", msg)
	return keys, true
}

func (d *doctor) okCredentials() {
	if d.spec.s3.accessKey == "" {
		d.ok("credentials", "anonymous requests are accepted")
		return
	}
	d.ok("credentials", fmt.Sprintf("the access key %q is accepted", d.spec.s3.accessKey))
}

// checkBucketSalt reads the sync-parameters object (never encrypted).
func (d *doctor) checkBucketSalt(ctx context.Context) ([]byte, bool) {
	p, err := d.bucket.GetSyncParameters(ctx)
	switch {
	case errors.Is(err, engine.ErrNotFound):
		d.ok("salt", "no sync parameters yet: the vault is new, and the first sync creates its salt")
		return nil, true
	case err != nil:
		code, msg := classify(err)
		d.problem("salt", code, "the sync parameters could not be read: "+msg,
			"restore "+negotiate.JournalSyncParametersKey+" from a backup of the bucket; a new salt would make the vault's packs unreadable")
		return nil, false
	}
	salt, err := p.Salt()
	if errors.Is(err, negotiate.ErrNoSalt) {
		d.ok("salt", "the sync parameters have no salt yet: the first sync creates it")
		return nil, true
	}
	if err != nil {
		d.problem("salt", exitRefused, "the sync parameters hold an unreadable salt: "+err.Error(),
			"restore "+negotiate.JournalSyncParametersKey+" from a backup of the bucket")
		return nil, false
	}
	d.ok("salt", fmt.Sprintf("the vault's salt is there (protocol version %d)", p.ProtocolVersion))
	return salt, true
}

// checkBucketPassphrase opens the newest packs with the passphrase.
func (d *doctor) checkBucketPassphrase(ctx context.Context, s livesync.Settings, salt []byte, packs int) {
	if !s.Encrypt {
		d.ok("passphrase", "not needed to open the packs: the vault is not encrypted")
		return
	}
	pass, err := d.env.passphraseFor(&d.spec, d.flags)
	if err != nil {
		d.add(finding{Check: "passphrase", Status: statusSkipped, Message: "the vault is encrypted and no passphrase was given, so its packs were not opened",
			Advice: "set LIVESYNC_PASSPHRASE or use --passphrase-file to check it"})
		return
	}
	if salt == nil || packs == 0 {
		d.ok("passphrase", "nothing to check yet: the bucket holds no encrypted pack")
		return
	}
	s.Passphrase = pass
	br := &bucketRemote{id: d.spec.String(), bucket: d.bucket.Name(), b: d.bucket, cipher: journalCipher(s, salt)}
	err = br.checkPassphrase(ctx)
	switch {
	case err == nil && br.checked:
		d.ok("passphrase", "the newest pack opens with this passphrase")
	case err == nil:
		d.warn("passphrase", "the newest packs do not open, for another reason than the passphrase (damaged or not LiveSync packs)",
			"pull to see which packs are set aside (livesync status lists them)")
	case errors.Is(err, engine.ErrDecrypt):
		d.problem("passphrase", exitPassphrase, "the newest packs do not decrypt: the passphrase is wrong, or the bucket's salt was reset after they were written",
			"check the passphrase ($LIVESYNC_PASSPHRASE, --passphrase-file, the passphrase_file of the configuration); if it is right, the bucket must be rebuilt from a device that has the whole vault")
	default:
		code, msg := classify(err)
		d.problem("passphrase", code, "the packs could not be read: "+msg, "")
	}
}

// checkQuarantine lists the packs the local replica set aside when
// receiving from this bucket.
func (d *doctor) checkQuarantine(ctx context.Context) {
	var st *remoteState
	if d.rep != nil && d.rep.vault != nil {
		st = d.rep.vault.Remotes[d.spec.String()]
	}
	if st == nil || st.JournalID == "" {
		d.add(finding{Check: "quarantine", Status: statusSkipped, Message: "the local replica has received nothing from this bucket yet"})
		return
	}
	qs, err := quarantinedPacks(ctx, d.rep.st, st)
	if err != nil {
		d.warn("quarantine", "the journal's checkpoint in the local replica cannot be read: "+err.Error(), "")
		return
	}
	if len(qs) == 0 {
		d.ok("quarantine", "no pack was set aside: every pack received so far opened")
		return
	}
	var details []string
	for _, q := range qs {
		details = append(details, fmt.Sprintf("%s (%s): %s", q.Key, q.Stage, q.Err))
	}
	d.add(finding{Check: "quarantine", Status: statusWarning, Details: details,
		Message:  fmt.Sprintf("%d %s could not be opened and %s set aside; the files in them are missing here:", len(qs), plural(len(qs), "pack", "packs"), plural(len(qs), "is", "are")),
		Commands: [][]string{d.command("pull", "--retry-quarantined")},
		Advice: fmt.Sprintf("%s tries them again; if they still fail they are damaged: re-send their files from the device that wrote them",
			commandLine(d.command("pull", "--retry-quarantined")))})
}
