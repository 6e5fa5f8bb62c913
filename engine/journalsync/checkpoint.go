package journalsync

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
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

	// The stored form (see plan): the generation and segment count of
	// the stored checkpoint, how much of each set's encoding it holds,
	// the sizes of its base and log, whether the next save must write a
	// new base, and a count of resets (a save planned before a reset
	// must not mark the new sets saved).
	gen, segments       int
	saved               offsets
	baseBytes, logBytes int
	needBase            bool
	resets              int
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
// (engine/FORMAT.md §6.5: the four sets; here also the index and the
// quarantine, whose packs are gone). lastLocalSeq and the epoch are
// kept, as upstream keeps them; the next save rewrites the stored form.
func (s *state) wipe() {
	seq, epoch := s.lastLocalSeq, s.epoch
	s.reset()
	s.lastLocalSeq, s.epoch = seq, epoch
}

// reset empties the state; the next save replaces the stored form.
func (s *state) reset() {
	gen, segments, resets := s.gen, s.segments, s.resets
	*s = *newState()
	s.gen, s.segments, s.resets, s.needBase = gen, segments, resets+1, true
}

// The stored form. The checkpoint is one _local document (the head:
// the scalar fields, the quarantine and the retry list) and a log of
// segment documents holding the sets and the index. A save appends the
// members added since the previous save as one segment, then rewrites
// the head with the new segment count; so a save costs what it adds,
// not what the checkpoint holds. When the log outgrows the first segment
// (the base), or holds maxSegments segments, the whole state is written
// as the base of the other generation and the head switches to it.
// Segments are written before the head that counts them, so a crash
// between the two leaves the previous checkpoint intact, and a segment
// beyond the head's count is never read.
const (
	// maxSegments bounds the segments of one generation (and the reads
	// of a load).
	maxSegments = 64
	// compactMin: a log smaller than this is not compacted even when it
	// outgrows the base, so small checkpoints do not rewrite themselves.
	compactMin = 64 << 10
)

// segmentID is the id of segment i of generation gen.
func segmentID(cpID string, gen, i int) string {
	return cpID + "." + strconv.Itoa(gen) + "." + strconv.Itoa(i)
}

// offsets are byte lengths into the set encodings: how much of each is
// stored in segments.
type offsets struct {
	known, sent, received, sentFiles, index int
}

func (s *state) encLens() offsets {
	return offsets{len(s.knownIDs.enc), len(s.sentIDs.enc), len(s.receivedFiles.enc), len(s.sentFiles.enc), len(s.index.enc)}
}

// checkpointHead is the stored head document.
type checkpointHead struct {
	Version      int                        `json:"version"`
	LastLocalSeq json.RawMessage            `json:"lastLocalSeq"`
	JournalEpoch string                     `json:"journalEpoch"`
	Opened       bool                       `json:"opened"`
	LastOpened   string                     `json:"lastOpened"`
	Quarantine   map[string]quarantineEntry `json:"quarantine"`
	Retry        []string                   `json:"retry"`
	Gen          int                        `json:"gen"`
	Segments     int                        `json:"segments"`
}

// checkpointSegment is a stored segment: members added to each set.
type checkpointSegment struct {
	KnownIDs      []string     `json:"knownIDs"`
	SentIDs       []string     `json:"sentIDs"`
	ReceivedFiles []string     `json:"receivedFiles"`
	SentFiles     []string     `json:"sentFiles"`
	Index         []indexEntry `json:"index"`
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
	if e.Name == "" {
		return errors.New("index entry without a pack name")
	}
	return json.Unmarshal(pair[1], &e.Chunks)
}

// decodeStrict decodes exactly one JSON object into v.
func decodeStrict(b []byte, v any, what string) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("journalsync: checkpoint %s is not valid JSON of the expected shape: %w", what, engine.ErrMalformed)
	}
	if dec.More() {
		return fmt.Errorf("journalsync: checkpoint %s has data after its object: %w", what, engine.ErrMalformed)
	}
	return nil
}

// decodeHead reads a stored head into a new state (without the sets,
// which its segments hold). It never panics; input this version did not
// write is an error wrapping engine.ErrMalformed, or engine.ErrUnsupported
// for another version.
func decodeHead(b []byte) (*state, error) {
	var h checkpointHead
	if err := decodeStrict(b, &h, "head"); err != nil {
		return nil, err
	}
	if h.Version != checkpointVersion {
		return nil, fmt.Errorf("journalsync: checkpoint version %d, this engine reads %d: %w", h.Version, checkpointVersion, engine.ErrUnsupported)
	}
	if h.Gen != 0 && h.Gen != 1 || h.Segments < 0 || h.Segments > maxSegments {
		return nil, fmt.Errorf("journalsync: checkpoint names generation %d with %d segments: %w", h.Gen, h.Segments, engine.ErrMalformed)
	}
	s := newState()
	seq, err := decodeSeq(h.LastLocalSeq)
	if err != nil {
		return nil, err
	}
	s.lastLocalSeq, s.epoch, s.opened, s.lastOpened = seq, h.JournalEpoch, h.Opened, h.LastOpened
	s.gen, s.segments = h.Gen, h.Segments
	for k, q := range h.Quarantine {
		s.quarantine[k] = q
		s.noteName(k)
	}
	for _, k := range h.Retry {
		s.retry[k] = struct{}{}
	}
	return s, nil
}

// applySegment adds the members of a stored segment to s.
func (s *state) applySegment(b []byte) error {
	var g checkpointSegment
	if err := decodeStrict(b, &g, "segment"); err != nil {
		return err
	}
	for _, k := range g.KnownIDs {
		s.knownIDs.add(k)
	}
	for _, k := range g.SentIDs {
		s.sentIDs.add(k)
	}
	for _, k := range g.ReceivedFiles {
		s.addReceived(k)
	}
	for _, k := range g.SentFiles {
		s.addSentFile(k)
	}
	for _, e := range g.Index {
		s.addIndex(e.Name, e.Chunks)
	}
	return nil
}

// decodeSeq accepts lastLocalSeq as a string, or a number as upstream
// stores it; absent, null or 0 is "" (from the start).
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

// loadCheckpoint reads the stored checkpoint cpID of store st; nil, nil
// when there is none.
func loadCheckpoint(ctx context.Context, st engine.Endpoint, cpID string) (*state, error) {
	raw, err := st.GetLocal(ctx, cpID)
	if errors.Is(err, engine.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	s, err := decodeHead(raw)
	if err != nil {
		return nil, err
	}
	for i := range s.segments {
		raw, err := st.GetLocal(ctx, segmentID(cpID, s.gen, i))
		if errors.Is(err, engine.ErrNotFound) {
			return nil, fmt.Errorf("journalsync: checkpoint segment %d of %d is missing: %w", i, s.segments, engine.ErrMalformed)
		}
		if err != nil {
			return nil, err
		}
		if err := s.applySegment(raw); err != nil {
			return nil, fmt.Errorf("segment %d: %w", i, err)
		}
		if i == 0 {
			s.baseBytes = len(raw)
		} else {
			s.logBytes += len(raw)
		}
	}
	s.saved = s.encLens()
	return s, nil
}

// savePlan is what one save writes, captured under Journal.mu from
// encodings that later additions never overwrite.
type savePlan struct {
	head  []byte
	segID string
	seg   []byte // nil: no segment to write
	base  bool   // seg is a new base

	gen, segments       int
	saved               offsets
	baseBytes, logBytes int
	resets              int
}

// plan prepares the next save of s, stored under cpID.
func (s *state) plan(cpID string) savePlan {
	lens := s.encLens()
	p := savePlan{gen: s.gen, segments: s.segments, saved: s.saved, baseBytes: s.baseBytes, logBytes: s.logBytes, resets: s.resets}
	delta := 0
	for _, d := range [][2]int{{lens.known, s.saved.known}, {lens.sent, s.saved.sent}, {lens.received, s.saved.received},
		{lens.sentFiles, s.saved.sentFiles}, {lens.index, s.saved.index}} {
		delta += d[0] - d[1]
	}
	switch {
	case s.needBase || s.segments == 0 && delta > 0 || s.segments >= maxSegments ||
		delta > 0 && s.logBytes+delta > s.baseBytes && s.logBytes+delta > compactMin:
		p.base = true
		if s.segments > 0 || s.needBase {
			p.gen = 1 - s.gen
		}
		p.seg = encodeSegment(s, offsets{})
		p.segID = segmentID(cpID, p.gen, 0)
		p.segments, p.baseBytes, p.logBytes = 1, len(p.seg), 0
		p.saved = lens
	case delta > 0:
		p.seg = encodeSegment(s, s.saved)
		p.segID = segmentID(cpID, s.gen, s.segments)
		p.segments++
		p.logBytes += len(p.seg)
		p.saved = lens
	}
	p.head = s.encodeHead(p.gen, p.segments)
	return p
}

// commit records a successful save in s. The layout fields always follow
// the store; what was saved only when s was not reset meanwhile (then a
// new base is due anyway).
func (s *state) commit(p savePlan) {
	s.gen, s.segments, s.baseBytes, s.logBytes = p.gen, p.segments, p.baseBytes, p.logBytes
	if s.resets == p.resets {
		s.saved = p.saved
		if p.base {
			s.needBase = false
		}
	}
}

// encodeHead encodes the head document.
func (s *state) encodeHead(gen, segments int) []byte {
	b := []byte(`{"version":`)
	b = strconv.AppendInt(b, checkpointVersion, 10)
	b = append(b, `,"lastLocalSeq":`...)
	b = appendJSONString(b, s.lastLocalSeq)
	b = append(b, `,"journalEpoch":`...)
	b = appendJSONString(b, s.epoch)
	b = append(b, `,"opened":`...)
	b = strconv.AppendBool(b, s.opened)
	b = append(b, `,"lastOpened":`...)
	b = appendJSONString(b, s.lastOpened)
	q, _ := json.Marshal(s.quarantine) // map keys sorted: deterministic
	b = append(b, `,"quarantine":`...)
	b = append(b, q...)
	b = append(b, `,"retry":[`...)
	for i, k := range slices.Sorted(maps.Keys(s.retry)) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
	}
	b = append(b, `],"gen":`...)
	b = strconv.AppendInt(b, int64(gen), 10)
	b = append(b, `,"segments":`...)
	b = strconv.AppendInt(b, int64(segments), 10)
	return append(b, '}')
}

// encodeSegment encodes the members of s added after from.
func encodeSegment(s *state, from offsets) []byte {
	parts := []struct {
		name string
		enc  []byte
		from int
	}{
		{"knownIDs", s.knownIDs.enc, from.known},
		{"sentIDs", s.sentIDs.enc, from.sent},
		{"receivedFiles", s.receivedFiles.enc, from.received},
		{"sentFiles", s.sentFiles.enc, from.sentFiles},
		{"index", s.index.enc, from.index},
	}
	n := 96
	for _, p := range parts {
		n += len(p.enc) - p.from
	}
	b := make([]byte, 0, n)
	for i, p := range parts {
		if i == 0 {
			b = append(b, '{')
		} else {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, p.name...)
		b = append(b, `":[`...)
		body := p.enc[p.from:]
		if len(body) > 0 && body[0] == ',' {
			body = body[1:]
		}
		b = append(b, body...)
		b = append(b, ']')
	}
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
