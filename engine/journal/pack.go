package journal

import (
	"errors"
	"fmt"

	"github.com/livesync-go/livesync-go/engine"
)

// Cipher encrypts and decrypts whole journal objects. Upstream uses the
// HKDF V2 binary layout iv(12) || hkdfSalt(32) || ciphertext || tag with
// the bucket's PBKDF2 salt, and on decryption falls back to the legacy V1
// layout (commonlib src/replication/journal/JournalSyncCore.ts
// encryptForUpload, decryptDownloaded); *e2ee.Cipher implements it.
// DecryptBinary must return an error wrapping engine.ErrDecrypt for a
// wrong passphrase or altered data. Implementations must be safe to call
// on any input. A nil Cipher means plain (unencrypted) packs.
type Cipher interface {
	EncryptBinary(plaintext []byte) ([]byte, error)
	DecryptBinary(ciphertext []byte) ([]byte, error)
}

// Seal builds the object body of a pack: EncodePack, then Deflate, then,
// if c is not nil, c.EncryptBinary. Errors are *engine.Error with Stage
// engine.StageEncode or engine.StageEncrypt.
func Seal(records []Record, c Cipher) ([]byte, error) {
	payload, err := EncodePack(records)
	if err != nil {
		return nil, err
	}
	z, err := Deflate(payload)
	if err != nil {
		return nil, err
	}
	if c == nil {
		return z, nil
	}
	obj, err := c.EncryptBinary(z)
	if err != nil {
		return nil, &engine.Error{Op: "seal pack", Stage: engine.StageEncrypt, Err: fmt.Errorf("journal: encrypt: %w", err)}
	}
	return obj, nil
}

// Open reads the object body of a pack stored under key (key may be empty;
// it only names the object in errors): c.DecryptBinary if c is not nil,
// then Inflate with limit (DefaultInflateLimit when <= 0), then
// DecodePack. Errors are *engine.Error with DocID = key and Stage
// engine.StageDecrypt (wrapping engine.ErrDecrypt) or engine.StageDecode
// (wrapping engine.ErrMalformed, a *ParseError, or ErrTooLarge); the
// message says whether decrypt, inflate or parse failed. The returned
// records do not share memory with object.
func Open(key string, object []byte, c Cipher, limit int64) ([]Record, error) {
	var recs []Record
	err := OpenFunc(key, object, c, limit, func(r Record) error {
		recs = append(recs, r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return recs, nil
}

// OpenFunc is Open that hands each record to fn instead of collecting
// them; an error from fn stops it and is returned unchanged. The inflated
// payload is held in memory (at most limit bytes), the records are not.
func OpenFunc(key string, object []byte, c Cipher, limit int64, fn func(Record) error) error {
	z := object
	if c != nil {
		var err error
		z, err = c.DecryptBinary(object)
		if err != nil {
			if !errors.Is(err, engine.ErrDecrypt) {
				err = fmt.Errorf("%w: %w", engine.ErrDecrypt, err)
			}
			return &engine.Error{Op: "open pack", DocID: key, Stage: engine.StageDecrypt, Err: fmt.Errorf("journal: decrypt: %w", err)}
		}
	}
	payload, err := inflate(z, limit)
	if err != nil {
		return &engine.Error{Op: "open pack", DocID: key, Stage: engine.StageDecode, Err: err}
	}
	return decodeFunc("open pack", key, payload, fn)
}
