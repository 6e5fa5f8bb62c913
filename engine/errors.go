package engine

import (
	"errors"
	"strings"
)

// Sentinel errors. Callers test for them with errors.Is; every package of
// the engine wraps one of these rather than inventing string matches.
var (
	// ErrDecrypt means ciphertext could not be opened: the passphrase or
	// salt is wrong, or the data was truncated or altered. It is permanent
	// for the same input and key.
	ErrDecrypt = errors.New("engine: cannot decrypt: wrong passphrase or altered data")
	// ErrMalformed means input does not follow the LiveSync format
	// (invalid base64, broken DEFLATE, bad JSON, a record without its
	// separator, a chunk list that does not add up).
	ErrMalformed = errors.New("engine: malformed data")
	// ErrUnsupported means the input uses a format or setting this engine
	// does not implement.
	ErrUnsupported = errors.New("engine: unsupported format")
	// ErrSizeMismatch means reassembled file bytes differ in length from
	// the size recorded in the metadata document.
	ErrSizeMismatch = errors.New("engine: size mismatch")
	// ErrMissingChunk means a metadata document names a chunk that is not
	// available.
	ErrMissingChunk = errors.New("engine: missing chunk")
	// ErrNotFound means a document does not exist.
	ErrNotFound = errors.New("engine: not found")
	// ErrNoDatabase means the database (or bucket) itself does not exist,
	// not just the document or object asked for. Errors wrapping it also
	// wrap ErrNotFound; a caller that must tell a missing object from a
	// missing bucket (a journal skips a pack deleted after its listing,
	// but fails on a missing bucket) tests for this sentinel, never the
	// Stage. negotiate.ErrNoDatabase and the S3 adapter's ErrNoBucket wrap
	// it.
	ErrNoDatabase = errors.New("engine: the database or bucket does not exist")
	// ErrTooLarge means a request or document exceeds what the other side
	// accepts (HTTP 413); the caller should send less at once.
	ErrTooLarge = errors.New("engine: too large")
	// ErrExists means a create-only write found something under the name
	// already and left it as it was (journalsync.ErrExists is this value).
	ErrExists = errors.New("engine: already exists")
)

// Stage names the step of processing at which an Error happened.
type Stage string

// Stages used in Error.
const (
	StageDecrypt   Stage = "decrypt"
	StageEncrypt   Stage = "encrypt"
	StageDecode    Stage = "decode"
	StageEncode    Stage = "encode"
	StageSize      Stage = "size"
	StageTransport Stage = "transport"
	StageAuth      Stage = "auth"
	StageProtocol  Stage = "protocol"
	StageStorage   Stage = "storage"
)

// Error is the structured error of the engine: which operation failed on
// which document, at which stage, and why. Err is never nil and usually
// wraps one of the sentinel errors above. Error strings never contain
// passphrases, keys or note contents; DocID may be a path-derived id and
// is the only document detail reported.
type Error struct {
	Op    string // the operation, e.g. "read file", "decode pack"
	DocID string // the document (or object key) concerned; may be empty
	Stage Stage  // the stage that failed
	Err   error  // the cause
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Op != "" {
		b.WriteString(e.Op)
	}
	if e.DocID != "" {
		if b.Len() > 0 {
			b.WriteString(" ")
		}
		b.WriteString("\"")
		b.WriteString(e.DocID)
		b.WriteString("\"")
	}
	if e.Stage != "" {
		b.WriteString(" (")
		b.WriteString(string(e.Stage))
		b.WriteString(")")
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	if e.Err != nil {
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// permanentError marks an error that retrying will not fix.
type permanentError struct{ err error }

func (p *permanentError) Error() string { return p.err.Error() }
func (p *permanentError) Unwrap() error { return p.err }

// Permanent marks err as permanent: retry decorators return it at once
// instead of trying again, whatever its stage. The mark is kept through
// wrapping (fmt.Errorf with %w); errors.Is and errors.As still see err.
// Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil || IsPermanent(err) {
		return err
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err, or an error it wraps, was marked with
// Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}
