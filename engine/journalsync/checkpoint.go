package journalsync

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/journal"
)

// checkpointPrefix starts the id of the checkpoint document (commonlib
// JournalSyncCore.ts updateCheckPointInfo: `bucketsync-checkpoint-${hash}`).
const checkpointPrefix = "bucketsync-checkpoint-"

// checkpointVersion is written into every checkpoint; a checkpoint of
// another version is refused rather than misread.
const checkpointVersion = 1

// CheckpointID returns the id (without "_local/") of the checkpoint
// document of the journal identified by remoteID (Objects.ID, which is
// upstream's "endpoint,bucket+prefix,region"): "bucketsync-checkpoint-" +
// btoa(encodeURI(remoteID)), as commonlib JournalSyncCore.ts getHash
// names it.
func CheckpointID(remoteID string) string {
	return checkpointPrefix + base64.StdEncoding.EncodeToString([]byte(encodeURI(remoteID)))
}

// encodeURI is ECMAScript's encodeURI: every UTF-8 byte outside the
// unreserved and reserved URI characters becomes %XX (upper-case hex).
// (JavaScript throws on a lone surrogate; invalid UTF-8 is encoded byte
// by byte here.)
func encodeURI(s string) string {
	const keep = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789;,/?:@&=+$-_.!~*'()#"
	const hex = "0123456789ABCDEF"
	var b []byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x80 && bytes.IndexByte([]byte(keep), c) >= 0 {
			b = append(b, c)
			continue
		}
		b = append(b, '%', hex[c>>4], hex[c&15])
	}
	return string(b)
}

// quarantineEntry is the checkpoint's record of a quarantined pack.
type quarantineEntry struct {
	Stage string    `json:"stage"`
	Error string    `json:"error"`
	At    time.Time `json:"at"`
}

// strSet is a set of strings that keeps the JSON of its members (the body
// of an array, without brackets) as they are added, so that saving the
// checkpoint costs a copy, not a re-encoding. Members are only ever
// added; enc is only ever appended to (a snapshot may keep enc[:n]).
type strSet struct {
	m   map[string]struct{}
	enc []byte
}

func (s *strSet) has(k string) bool { _, ok := s.m[k]; return ok }

func (s *strSet) len() int { return len(s.m) }

// add inserts k and reports whether it was new.
func (s *strSet) add(k string) bool {
	if _, ok := s.m[k]; ok {
		return false
	}
	if s.m == nil {
		s.m = make(map[string]struct{})
	}
	s.m[k] = struct{}{}
	if len(s.enc) > 0 {
		s.enc = append(s.enc, ',')
	}
	s.enc = appendJSONString(s.enc, k)
	return true
}

// packIndex maps chunk ids to the pack that holds them (the first pack
// indexed that holds one). Packs are only added; enc is the JSON of the
// entries ["name",["h:…",…]], comma separated.
type packIndex struct {
	packs  []string         // pack names by number
	pos    map[string]int32 // pack name → number
	chunks map[string]int32 // chunk id → pack number
	enc    []byte
}

func (x *packIndex) has(name string) bool { _, ok := x.pos[name]; return ok }

// add indexes the chunk ids of a pack; a pack indexed before is left as
// it is.
func (x *packIndex) add(name string, ids []string) {
	if x.has(name) {
		return
	}
	if x.pos == nil {
		x.pos = make(map[string]int32)
		x.chunks = make(map[string]int32)
	}
	n := int32(len(x.packs))
	x.packs = append(x.packs, name)
	x.pos[name] = n
	if len(x.enc) > 0 {
		x.enc = append(x.enc, ',')
	}
	x.enc = append(x.enc, '[')
	x.enc = appendJSONString(x.enc, name)
	x.enc = append(x.enc, ",["...)
	for i, id := range ids {
		if _, ok := x.chunks[id]; !ok {
			x.chunks[id] = n
		}
		if i > 0 {
			x.enc = append(x.enc, ',')
		}
		x.enc = appendJSONString(x.enc, id)
	}
	x.enc = append(x.enc, "]]"...)
}

// state is the checkpoint of one journal on this device (commonlib
// JournalSyncTypes.ts CheckPointInfo, plus the quarantine and the chunk
// index). Pack names are relative to the bucket prefix, as upstream
// records them. Guarded by Journal.mu.
type state struct {
	lastLocalSeq string
	epoch        string
	// opened records that the configured cipher was proven right for
	// this journal once: a pack was decrypted (without a cipher:
	// inflated). After that, a pack that fails to decrypt is corruption,
	// unless lastOpened, the last pack opened, fails too.
	opened     bool
	lastOpened string

	knownIDs, sentIDs, receivedFiles, sentFiles strSet
	index                                       packIndex
	quarantine                                  map[string]quarantineEntry
	// retry holds quarantined packs released by ClearQuarantine, which
	// the next Receive tries again.
	retry map[string]struct{}

	// Derived, not stored: the greatest received and sent names
	// (ComparePackKeys) and the greatest milliseconds of any pack name
	// seen, which the next sent pack must exceed.
	maxReceived, maxSent string
	maxMillis            int64
}

func newState() *state {
	return &state{quarantine: map[string]quarantineEntry{}, retry: map[string]struct{}{}, maxMillis: -1}
}

func (s *state) noteName(name string) {
	if ms, ok := journal.ParsePackKey("", name); ok && ms > s.maxMillis {
		s.maxMillis = ms
	}
}

func (s *state) addReceived(name string) {
	if s.receivedFiles.add(name) {
		s.noteName(name)
		if s.maxReceived == "" || journal.ComparePackKeys(name, s.maxReceived) > 0 {
			s.maxReceived = name
		}
	}
}

func (s *state) addSentFile(name string) {
	if s.sentFiles.add(name) {
		s.noteName(name)
		if s.maxSent == "" || journal.ComparePackKeys(name, s.maxSent) > 0 {
			s.maxSent = name
		}
	}
}

func (s *state) addIndex(name string, ids []string) {
	s.index.add(name, ids)
	s.noteName(name)
}

// wipe forgets everything this device knew about the bucket's content
// (FORMAT.md §6.5: the four sets; here also the index and the
// quarantine, whose packs are gone). lastLocalSeq is kept, as upstream.
func (s *state) wipe() {
	seq, epoch := s.lastLocalSeq, s.epoch
	*s = *newState()
	s.lastLocalSeq, s.epoch = seq, epoch
}

// checkpointDoc is the stored form of a state.
type checkpointDoc struct {
	Version       int                        `json:"version"`
	LastLocalSeq  json.RawMessage            `json:"lastLocalSeq"`
	JournalEpoch  string                     `json:"journalEpoch"`
	Opened        bool                       `json:"opened"`
	LastOpened    string                     `json:"lastOpened"`
	KnownIDs      []string                   `json:"knownIDs"`
	SentIDs       []string                   `json:"sentIDs"`
	ReceivedFiles []string                   `json:"receivedFiles"`
	SentFiles     []string                   `json:"sentFiles"`
	Quarantine    map[string]quarantineEntry `json:"quarantine"`
	Retry         []string                   `json:"retry"`
	Index         []indexEntry               `json:"index"`
}

// indexEntry is one pack of the stored index: ["name", ["h:…", …]].
type indexEntry struct {
	Name   string
	Chunks []string
}

func (e *indexEntry) UnmarshalJSON(b []byte) error {
	var pair []json.RawMessage
	if err := json.Unmarshal(b, &pair); err != nil {
		return err
	}
	if len(pair) != 2 {
		return fmt.Errorf("index entry has %d elements, want 2", len(pair))
	}
	if err := json.Unmarshal(pair[0], &e.Name); err != nil {
		return err
	}
	return json.Unmarshal(pair[1], &e.Chunks)
}

// decodeCheckpoint reads a stored checkpoint. It never panics; any
// input that is not a checkpoint this version wrote is an error wrapping
// engine.ErrMalformed (or engine.ErrUnsupported for another version).
func decodeCheckpoint(b []byte) (*state, error) {
	var d checkpointDoc
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("journalsync: checkpoint is not valid JSON of the expected shape: %w", engine.ErrMalformed)
	}
	if dec.More() {
		return nil, fmt.Errorf("journalsync: checkpoint has data after its object: %w", engine.ErrMalformed)
	}
	if d.Version != checkpointVersion {
		return nil, fmt.Errorf("journalsync: checkpoint version %d, this engine reads %d: %w", d.Version, checkpointVersion, engine.ErrUnsupported)
	}
	s := newState()
	seq, err := decodeSeq(d.LastLocalSeq)
	if err != nil {
		return nil, err
	}
	s.lastLocalSeq, s.epoch, s.opened, s.lastOpened = seq, d.JournalEpoch, d.Opened, d.LastOpened
	for _, k := range d.KnownIDs {
		s.knownIDs.add(k)
	}
	for _, k := range d.SentIDs {
		s.sentIDs.add(k)
	}
	for _, k := range d.ReceivedFiles {
		s.addReceived(k)
	}
	for _, k := range d.SentFiles {
		s.addSentFile(k)
	}
	for _, e := range d.Index {
		if e.Name == "" || s.index.has(e.Name) {
			return nil, fmt.Errorf("journalsync: checkpoint index names a pack twice or an empty name: %w", engine.ErrMalformed)
		}
		s.addIndex(e.Name, e.Chunks)
	}
	for k, q := range d.Quarantine {
		s.quarantine[k] = q
		s.noteName(k)
	}
	for _, k := range d.Retry {
		s.retry[k] = struct{}{}
	}
	return s, nil
}

// decodeSeq accepts lastLocalSeq as a string, or a number as upstream
// stores it; absent or null is "" (from the start).
func decodeSeq(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("journalsync: checkpoint lastLocalSeq: %w", engine.ErrMalformed)
		}
		return s, nil
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil {
		return "", fmt.Errorf("journalsync: checkpoint lastLocalSeq is neither a string nor a number: %w", engine.ErrMalformed)
	}
	if v, err := n.Int64(); err == nil {
		if v == 0 {
			return "", nil
		}
		return strconv.FormatInt(v, 10), nil
	}
	return n.String(), nil
}

// snapshot is an immutable view of a state for saving: the set encodings
// are shared slices that later additions never overwrite.
type snapshot struct {
	head                                    []byte // the scalar fields
	known, sent, received, sentFiles, index []byte
	quarantine, retry                       []byte
}

// snapshot captures s; the caller holds Journal.mu. Only the small parts
// are encoded here.
func (s *state) snapshot() snapshot {
	head := []byte(`{"version":`)
	head = strconv.AppendInt(head, checkpointVersion, 10)
	head = append(head, `,"lastLocalSeq":`...)
	head = appendJSONString(head, s.lastLocalSeq)
	head = append(head, `,"journalEpoch":`...)
	head = appendJSONString(head, s.epoch)
	head = append(head, `,"opened":`...)
	head = strconv.AppendBool(head, s.opened)
	head = append(head, `,"lastOpened":`...)
	head = appendJSONString(head, s.lastOpened)
	q, _ := json.Marshal(s.quarantine) // map keys sorted: deterministic
	r, _ := json.Marshal(slices.Sorted(maps.Keys(s.retry)))
	if len(s.retry) == 0 {
		r = []byte("[]")
	}
	return snapshot{
		head:  head,
		known: s.knownIDs.enc, sent: s.sentIDs.enc, received: s.receivedFiles.enc, sentFiles: s.sentFiles.enc,
		index: s.index.enc, quarantine: q, retry: r,
	}
}

// encode assembles the checkpoint JSON.
func (p snapshot) encode() []byte {
	n := len(p.head) + len(p.known) + len(p.sent) + len(p.received) + len(p.sentFiles) + len(p.index) + len(p.quarantine) + len(p.retry) + 128
	b := make([]byte, 0, n)
	b = append(b, p.head...)
	arr := func(name string, body []byte) {
		b = append(b, `,"`...)
		b = append(b, name...)
		b = append(b, `":[`...)
		b = append(b, body...)
		b = append(b, ']')
	}
	arr("knownIDs", p.known)
	arr("sentIDs", p.sent)
	arr("receivedFiles", p.received)
	arr("sentFiles", p.sentFiles)
	b = append(b, `,"quarantine":`...)
	b = append(b, p.quarantine...)
	b = append(b, `,"retry":`...)
	b = append(b, p.retry...)
	arr("index", p.index)
	return append(b, '}')
}

// appendJSONString appends s as a JSON string. Invalid UTF-8 becomes
// U+FFFD, as encoding/json writes it.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < 0x80 {
			dst = append(dst, c)
			i++
			continue
		}
		if c < 0x80 {
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, `\ufffd`...)
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}
