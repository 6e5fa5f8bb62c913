//go:build !js

package p2p

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/negotiate"
	"github.com/livesync-go/livesync-go/engine/store"
)

// The replicate protocol: one stream per request. The client writes one
// request frame, a JSON object whose first member is "op", and closes its
// side; the server answers with one frame and closes the stream.
const (
	opInfo      = "info"
	opChanges   = "changes"
	opRevsDiff  = "revs_diff"
	opBulkGet   = "bulk_get"
	opBulkDocs  = "bulk_docs"
	opGetLocal  = "get_local"
	opPutLocal  = "put_local"
	opRecRead   = "rec_read"
	opRecWrite  = "rec_write"
	opRecExists = "rec_exists"
	opRecCreate = "rec_create"
	opProgress  = "progress"
)

// Limits of the replicate protocol.
const (
	// maxReplicateRequest bounds a request frame, but bulk_docs's.
	maxReplicateRequest = 4 << 20
	// MaxChangesLimit is the most rows one changes request returns (a
	// larger or zero limit is lowered to it).
	MaxChangesLimit = 1000
	// MaxBulkGet is the most revisions one bulk_get asks for.
	MaxBulkGet = 1000
	// MaxRevsDiff is the most documents one revs_diff names.
	MaxRevsDiff = 1000
	// MaxBulkDocs is the most documents one bulk_docs writes (the
	// engine halves its batches when a request is too large).
	MaxBulkDocs = 10000
	// maxLocalDoc bounds a _local document or a record written by a peer.
	maxLocalDoc = 1 << 20
)

// bulkDocsPrefix begins every bulk_docs request frame: the one request
// allowed past maxReplicateRequest (up to MaxFrameSize) is recognised by
// it before the rest is read.
var bulkDocsPrefix = []byte(`{"op":"bulk_docs"`)

// Answer statuses besides those of the chunks protocol.
const statusBusy = "busy"

// Error codes of an answer with status "error".
const (
	codeNotFound    = "not_found"
	codeConflict    = "conflict"
	codeTooLarge    = "too_large"
	codeBadRequest  = "bad_request"
	codeUnsupported = "unsupported"
	codeInternal    = "internal"
	// codeBusy is never sent: a request refused for want of memory is
	// answered with status "busy".
	codeBusy = "busy"
)

// request is the one frame a client sends on a replicate stream. Op comes
// first: its encoding must start with bulkDocsPrefix for bulk_docs.
type request struct {
	Op       string          `json:"op"`
	Since    string          `json:"since,omitempty"`
	Limit    int             `json:"limit,omitempty"`
	Selector json.RawMessage `json:"selector,omitempty"`
	Wait     bool            `json:"wait,omitempty"`
	WaitMS   int64           `json:"wait_ms,omitempty"` // longpoll: how long the client waits
	Revs     revsList        `json:"revs,omitempty"`    // revs_diff
	Get      getList         `json:"get,omitempty"`     // bulk_get
	Docs     docList         `json:"docs,omitempty"`    // bulk_docs
	ID       string          `json:"id,omitempty"`      // get_local, put_local
	Doc      json.RawMessage `json:"doc,omitempty"`     // put_local, rec_write
	Record   string          `json:"record,omitempty"`  // rec_read, rec_write
	Version  string          `json:"version,omitempty"` // rec_write
}

// errTooMany is a list of a request longer than the protocol allows,
// found while it is decoded (before it is all in memory).
var errTooMany = errors.New("too many entries")

// docList is bulk_docs's documents, decoded one at a time and refused
// past MaxBulkDocs: a frame of tiny documents would otherwise cost ten
// times its size in memory before anything is checked.
type docList []json.RawMessage

// UnmarshalJSON decodes a JSON array of at most MaxBulkDocs values.
func (l *docList) UnmarshalJSON(b []byte) error {
	return decodeBounded((*[]json.RawMessage)(l), b, MaxBulkDocs, "documents in one bulk_docs")
}

// getList is bulk_get's revisions, decoded one at a time and refused
// past MaxBulkGet.
type getList []wireDocRev

// UnmarshalJSON decodes a JSON array of at most MaxBulkGet revisions.
func (l *getList) UnmarshalJSON(b []byte) error {
	return decodeBounded((*[]wireDocRev)(l), b, MaxBulkGet, "revisions in one bulk_get")
}

// changeList is a changes answer's rows, refused past MaxChangesLimit
// while they are decoded (a client reads a peer's answer of up to a
// frame).
type changeList []wireChange

// UnmarshalJSON decodes a JSON array of at most MaxChangesLimit rows.
func (l *changeList) UnmarshalJSON(b []byte) error {
	return decodeBounded((*[]wireChange)(l), b, MaxChangesLimit, "rows in one changes page")
}

// resultList is a bulk_docs answer's results, refused past MaxBulkDocs.
type resultList []wireResult

// UnmarshalJSON decodes a JSON array of at most MaxBulkDocs results.
func (l *resultList) UnmarshalJSON(b []byte) error {
	return decodeBounded((*[]wireResult)(l), b, MaxBulkDocs, "results of one bulk_docs")
}

// chunkList is a chunks answer's chunks, refused past MaxIDsPerRequest.
type chunkList []wireChunk

// UnmarshalJSON decodes a JSON array of at most MaxIDsPerRequest chunks.
func (l *chunkList) UnmarshalJSON(b []byte) error {
	return decodeBounded((*[]wireChunk)(l), b, MaxIDsPerRequest, "chunks in one answer")
}

// chunkIDList is a chunks request's or answer's ids, refused past
// MaxIDsPerRequest.
type chunkIDList []engine.ChunkID

// UnmarshalJSON decodes a JSON array of at most MaxIDsPerRequest ids.
func (l *chunkIDList) UnmarshalJSON(b []byte) error {
	return decodeBounded((*[]engine.ChunkID)(l), b, MaxIDsPerRequest, "chunk ids in one request or answer")
}

// decodeBounded decodes the JSON array b (null: nothing) into *out one
// element at a time, failing with errTooMany past max elements.
func decodeBounded[T any](out *[]T, b []byte, max int, what string) error {
	if string(b) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return fmt.Errorf("%s: not an array", what)
	}
	list := []T{}
	for dec.More() {
		if len(list) == max {
			return fmt.Errorf("%w: more than %d %s", errTooMany, max, what)
		}
		var v T
		if err := dec.Decode(&v); err != nil {
			return err
		}
		list = append(list, v)
	}
	*out = list
	return nil
}

// revsList is revs_diff's map, decoded one entry at a time and refused
// past MaxRevsDiff documents.
type revsList map[string][]string

// UnmarshalJSON decodes a JSON object of at most MaxRevsDiff members.
func (m *revsList) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return errors.New("revs: not an object")
	}
	out := revsList{}
	for dec.More() {
		if len(out) == MaxRevsDiff {
			return fmt.Errorf("%w: more than %d documents in one revs_diff", errTooMany, MaxRevsDiff)
		}
		t, err := dec.Token()
		if err != nil {
			return err
		}
		id, _ := t.(string)
		var revs []string
		if err := dec.Decode(&revs); err != nil {
			return err
		}
		out[id] = revs
	}
	*m = out
	return nil
}

type wireDocRev struct {
	ID  string `json:"id"`
	Rev string `json:"rev"`
}

type wireChange struct {
	Seq     string   `json:"seq"`
	ID      string   `json:"id"`
	Revs    []string `json:"revs"`
	Deleted bool     `json:"deleted,omitempty"`
}

type wireResult struct {
	ID     string `json:"id"`
	Rev    string `json:"rev,omitempty"`
	Error  string `json:"error,omitempty"`
	Reason string `json:"reason,omitempty"`
}

type wireInfo struct {
	Name      string `json:"name"`
	UpdateSeq string `json:"update_seq"`
	DocCount  int64  `json:"doc_count"`
}

// response is the one frame a server answers with. Its lists decode
// within the protocol's counts (a hostile peer's frame of tiny entries
// would otherwise cost many times its size).
type response struct {
	Status   string          `json:"status"`
	Error    string          `json:"error,omitempty"`
	Code     string          `json:"code,omitempty"`
	Info     *wireInfo       `json:"info,omitempty"`
	Results  changeList      `json:"results,omitempty"`
	LastSeq  string          `json:"last_seq,omitempty"`
	Pending  *int            `json:"pending,omitempty"`
	Missing  revsList        `json:"missing,omitempty"`
	Docs     docList         `json:"docs,omitempty"`
	Written  resultList      `json:"written,omitempty"`
	Doc      json.RawMessage `json:"doc,omitempty"`
	Version  string          `json:"version,omitempty"`
	Exists   bool            `json:"exists,omitempty"`
	Progress string          `json:"progress,omitempty"`
}

// requestError is a request the server refuses to run, with its code.
type requestError struct {
	code string
	msg  string
}

// Error is the refusal's message.
func (e *requestError) Error() string { return e.msg }

func badRequest(format string, a ...any) error {
	return &requestError{code: codeBadRequest, msg: fmt.Sprintf(format, a...)}
}

func tooLarge(format string, a ...any) error {
	return &requestError{code: codeTooLarge, msg: fmt.Sprintf(format, a...)}
}

// readRequest reads one request frame from r: at most maxReplicateRequest
// bytes, or MaxFrameSize for a frame that starts with bulkDocsPrefix. A
// frame over its bound is a *requestError with codeTooLarge, and drained
// reports how many of its bytes are still to be read (0 when the frame is
// over MaxFrameSize, which is never read).
func readRequest(r io.Reader) (req request, n int, drain int64, err error) {
	return readRequestWithin(r, nil)
}

// readRequestWithin is readRequest that asks admit (nil: always yes)
// before it reads a bulk_docs frame over maxReplicateRequest; a refusal
// is a *requestError with codeBusy, the frame left to drain.
func readRequestWithin(r io.Reader, admit func(size int64) bool) (req request, n int, drain int64, err error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return request{}, 0, 0, err
	}
	size := binary.BigEndian.Uint32(hdr[:])
	if size > MaxFrameSize {
		return request{}, 0, 0, tooLarge("a request of %d bytes, over the frame limit of %d", size, MaxFrameSize)
	}
	var head []byte
	if size > maxReplicateRequest {
		head = make([]byte, len(bulkDocsPrefix))
		if _, err := io.ReadFull(r, head); err != nil {
			return request{}, 0, 0, fmt.Errorf("p2p: truncated frame: %w", err)
		}
		if !bytes.Equal(head, bulkDocsPrefix) {
			return request{}, 0, int64(size) - int64(len(head)),
				tooLarge("a request of %d bytes, over the limit of %d for anything but bulk_docs", size, maxReplicateRequest)
		}
		if admit != nil && !admit(int64(size)) {
			return request{}, 0, int64(size) - int64(len(head)),
				&requestError{code: codeBusy, msg: "too many large writes at once; retry later"}
		}
	}
	buf := make([]byte, size)
	copy(buf, head)
	if _, err := io.ReadFull(r, buf[len(head):]); err != nil {
		return request{}, 0, 0, fmt.Errorf("p2p: truncated frame: %w", err)
	}
	req, err = decodeRequest(buf)
	return req, len(buf), 0, err
}

// decodeRequest parses and checks a request frame's payload.
func decodeRequest(b []byte) (request, error) {
	var req request
	if err := json.Unmarshal(b, &req); err != nil {
		if errors.Is(err, errTooMany) {
			return request{}, tooLarge("%v", err)
		}
		return request{}, badRequest("malformed request: %v", err)
	}
	return req, checkRequest(&req)
}

// checkRequest enforces the protocol's bounds on req and lowers its
// changes limit to MaxChangesLimit.
func checkRequest(req *request) error {
	switch req.Op {
	case opInfo, opRecExists, opRecCreate, opProgress, opBulkDocs:
	case opChanges:
		if req.Limit <= 0 || req.Limit > MaxChangesLimit {
			req.Limit = MaxChangesLimit
		}
		if req.WaitMS < 0 {
			return badRequest("negative wait")
		}
	case opRevsDiff:
		if len(req.Revs) > MaxRevsDiff {
			return tooLarge("%d documents in one revs_diff, at most %d", len(req.Revs), MaxRevsDiff)
		}
	case opBulkGet:
		if len(req.Get) > MaxBulkGet {
			return tooLarge("%d revisions in one bulk_get, at most %d", len(req.Get), MaxBulkGet)
		}
	case opGetLocal, opPutLocal:
		if req.ID == "" || len(req.ID) > store.MaxLocalIDLength-maxPeerLocalPrefix || reservedLocal(req.ID) {
			return badRequest("the _local id %.64q is not one a peer may use", req.ID)
		}
		if req.Op == opPutLocal && (len(req.Doc) == 0 || len(req.Doc) > maxLocalDoc) {
			return badRequest("a _local document must be a JSON value of at most %d bytes", maxLocalDoc)
		}
	case opRecRead, opRecWrite:
		if _, ok := parseRecord(req.Record); !ok {
			return badRequest("unknown record %.64q", req.Record)
		}
		if req.Op == opRecWrite && (len(req.Doc) == 0 || len(req.Doc) > maxLocalDoc) {
			return badRequest("a record must be a JSON object of at most %d bytes", maxLocalDoc)
		}
	default:
		return badRequest("unknown op %.32q", req.Op)
	}
	return nil
}

// reservedLocal reports _local ids a peer may neither read nor write: the
// handshake's records, this replica's own records ("livesync-go-cli",
// "livesync-go-cli-held") and the hold-back's and served groups' state
// (under "livesync-go/"). Replication checkpoints are what peers use:
// "livesync-go-" and 32 hex digits (engine/replicate), which never start
// with "cli". (What a peer may use is kept under its own peer id anyway:
// peerLocalID.)
func reservedLocal(id string) bool {
	for _, p := range []string{"livesync-go/", "livesync-go-cli", "obsidian_livesync", "obsydian_livesync"} {
		if strings.HasPrefix(id, p) {
			return true
		}
	}
	return false
}

// parseRecord returns the record named on the wire.
func parseRecord(s string) (negotiate.Record, bool) {
	switch r := negotiate.Record(s); r {
	case negotiate.RecordSyncParameters, negotiate.RecordMilestone, negotiate.RecordVersion:
		return r, true
	}
	return "", false
}

// errorCode classifies a server-side failure for the answer.
func errorCode(err error) string {
	var re *requestError
	switch {
	case errors.As(err, &re):
		return re.code
	case errors.Is(err, engine.ErrNotFound):
		return codeNotFound
	case errors.Is(err, negotiate.ErrConflict), errors.Is(err, store.ErrConflict):
		return codeConflict
	case errors.Is(err, engine.ErrTooLarge), errors.Is(err, ErrFrameTooLarge):
		return codeTooLarge
	case errors.Is(err, engine.ErrUnsupported):
		return codeUnsupported
	case errors.Is(err, store.ErrInvalid), errors.Is(err, engine.ErrMalformed):
		return codeBadRequest
	}
	return codeInternal
}

// answerError is the client's error for an answer with status "error".
func answerError(op string, code, msg string) error {
	switch code {
	case codeNotFound:
		return fmt.Errorf("p2p %s: %w (%s)", op, engine.ErrNotFound, msg)
	case codeConflict:
		return fmt.Errorf("p2p %s: %w (%s)", op, negotiate.ErrConflict, msg)
	case codeTooLarge:
		return fmt.Errorf("p2p %s: %w (%s)", op, engine.ErrTooLarge, msg)
	case codeUnsupported:
		return fmt.Errorf("p2p %s: %w (%s)", op, engine.ErrUnsupported, msg)
	case codeBadRequest:
		return &engine.Error{Op: "p2p " + op, Stage: engine.StageProtocol, Err: fmt.Errorf("the peer refused the request: %s", msg)}
	}
	return &engine.Error{Op: "p2p " + op, Stage: engine.StageStorage, Err: fmt.Errorf("the peer failed: %s", msg)}
}
