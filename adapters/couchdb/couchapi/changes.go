package couchapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
)

// changesPageSize is how many rows one store call reads; a feed streams
// page after page, so a huge limit never holds more than this in memory.
const changesPageSize = 1000

// minHeartbeat bounds how often a feed wakes up to send a heartbeat.
const minHeartbeat = 50 * time.Millisecond

// maxChangesLimit stands for "no limit".
const maxChangesLimit = 1 << 62

// changesArgs are the parsed parameters of a _changes request.
type changesArgs struct {
	feed        string // normal, longpoll, continuous
	since       string
	limit       int64
	allDocs     bool // style=all_docs
	includeDocs bool
	conflicts   bool
	heartbeat   time.Duration // 0: none
	timeout     time.Duration
	selector    json.RawMessage
	designOnly  bool // filter=_design
}

// parseChanges reads the query string and, for POST, the body
// ({"doc_ids":[…]} or {"selector":{…}}), with CouchDB's error messages.
func (s *Server) parseChanges(q *request) (changesArgs, *apiError) {
	qv := q.r.URL.Query()
	a := changesArgs{feed: "normal", limit: maxChangesLimit, timeout: s.changesTimeout}
	switch f := qv.Get("feed"); f {
	case "", "normal":
	case "longpoll":
		a.feed = f
	case "continuous", "live":
		a.feed = "continuous"
	default:
		return a, badRequest("Supported `feed` types: normal, continuous, live, longpoll")
	}
	if q.r.Method == http.MethodHead {
		a.feed = "normal"
	}
	if d, _ := boolParam(qv, "descending"); d {
		return a, badRequest("descending=true is not supported by this server")
	}
	a.since = qv.Get("since")
	if !validSince(a.since) {
		return a, errBadSince
	}
	if v := qv.Get("limit"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		switch {
		case err != nil && strings.HasPrefix(v, "-"):
			return a, badRequest("The limit value should be a non-negative integer")
		case err != nil && errors.Is(err, strconv.ErrRange):
			n = maxChangesLimit
		case err != nil:
			return a, badRequest("The limit parameter should be a non-negative integer")
		case n < 0:
			return a, badRequest("The limit value should be a non-negative integer")
		}
		a.limit = min(n, maxChangesLimit)
	}
	switch st := qv.Get("style"); st {
	case "", "main_only":
	case "all_docs":
		a.allDocs = true
	default:
		return a, badRequest("style must be main_only or all_docs")
	}
	var ae *apiError
	if a.includeDocs, ae = boolParam(qv, "include_docs"); ae != nil {
		return a, ae
	}
	if a.conflicts, ae = boolParam(qv, "conflicts"); ae != nil {
		return a, ae
	}
	if ae := s.parseChangesWait(qv, &a); ae != nil {
		return a, ae
	}
	if ae := parseChangesFilter(q, qv, &a); ae != nil {
		return a, ae
	}
	return a, nil
}

// parseChangesWait reads how long a feed waits: heartbeat (bounded by
// minHeartbeat and the server's changes timeout) and timeout.
func (s *Server) parseChangesWait(qv url.Values, a *changesArgs) *apiError {
	if v := qv.Get("heartbeat"); v != "" {
		if v == "true" {
			a.heartbeat = s.changesTimeout
		} else {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return badRequest("Invalid heartbeat value. Expecting a positive integer value (in milliseconds).")
			}
			if n <= 0 {
				return badRequest("The heartbeat value should be a positive integer (in milliseconds).")
			}
			a.heartbeat = time.Duration(min(n, int64(s.changesTimeout/time.Millisecond))) * time.Millisecond
		}
		a.heartbeat = min(max(a.heartbeat, minHeartbeat), s.changesTimeout)
	}
	if v := qv.Get("timeout"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) || n < 0 || strings.HasPrefix(v, "-") {
			return badRequest("The timeout parameter should be a non-negative integer")
		}
		if err == nil && time.Duration(n) < s.changesTimeout/time.Millisecond {
			a.timeout = time.Duration(n) * time.Millisecond
		}
	}
	return nil
}

// parseChangesFilter reads the filter (and, for POST, the body that
// carries its doc_ids or selector) into a.
func parseChangesFilter(q *request, qv url.Values, a *changesArgs) *apiError {
	var body map[string]json.RawMessage
	if q.r.Method == http.MethodPost {
		b, ae := readBody(q.r)
		if ae != nil {
			return ae
		}
		if len(strings.TrimSpace(string(b))) > 0 {
			if body, ae = parseObject(b); ae != nil {
				return ae
			}
		}
	}
	switch f := qv.Get("filter"); f {
	case "":
	case "_doc_ids":
		raw := body["doc_ids"]
		if isNull(raw) {
			raw = json.RawMessage(qv.Get("doc_ids"))
		}
		var ids []string
		if isNull(raw) || json.Unmarshal(raw, &ids) != nil {
			return badRequest("`doc_ids` filter parameter is not a list of doc ids.")
		}
		if ids == nil {
			ids = []string{}
		}
		a.selector = mustJSON(map[string]any{"_id": map[string]any{"$in": ids}})
	case "_selector":
		raw := body["selector"]
		if isNull(raw) && qv.Get("selector") != "" {
			raw = json.RawMessage(qv.Get("selector"))
		}
		if isNull(raw) {
			return badRequest("Selector must be specified in POST payload")
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil || obj == nil {
			return badRequest("Selector error: expected a JSON object")
		}
		a.selector = raw
	case "_design":
		a.designOnly = true
	case "_view":
		return badRequest("filter=_view is not supported by this server")
	default:
		return badRequest("Filter functions are not supported by this server; use filter=_selector or filter=_doc_ids")
	}
	return nil
}

// errBadSince is CouchDB's answer to a since it cannot read.
var errBadSince = badRequest("Malformed sequence supplied in 'since' parameter.")

// validSince reports whether since is a sequence of this server's stores
// (a decimal integer), "now" or empty.
func validSince(since string) bool {
	if since == "" || since == "now" {
		return true
	}
	_, err := strconv.ParseUint(since, 10, 64)
	return err == nil
}

// seqAfter reports whether sequence a is after b (both decimal).
func seqAfter(a, b string) bool {
	x, e1 := strconv.ParseUint(a, 10, 64)
	y, e2 := strconv.ParseUint(b, 10, 64)
	return e1 == nil && e2 == nil && x > y
}

// changes answers GET|POST /{db}/_changes.
func (s *Server) changes(q *request) *apiError {
	a, ae := s.parseChanges(q)
	if ae != nil {
		return ae
	}
	ctx := q.r.Context()
	if a.since != "" && a.since != "0" {
		// "now" is the current sequence; a sequence beyond it (a client's
		// mistake or a hostile one) is answered as the current one, so a
		// client never checkpoints a last_seq that later changes would be
		// below.
		info, err := q.st.Info(ctx)
		if err != nil {
			return asAPIError(err)
		}
		if a.since == "now" || seqAfter(a.since, info.UpdateSeq) {
			a.since = info.UpdateSeq
		}
	}
	if a.feed != "normal" {
		q.w.stream = true // every row and heartbeat must reach the client at once: never compressed
		if !s.beginFeed() {
			return errShuttingDown
		}
		defer s.feeds.Done()
		var cancel context.CancelFunc
		ctx, cancel = s.feedContext(q.r)
		defer cancel()
	}
	f := &feed{s: s, q: q, a: a, ctx: ctx, since: a.since, remaining: a.limit,
		fw: &feedWriter{w: q.w, rc: http.NewResponseController(q.w)}}
	return f.run()
}

// feed streams one _changes answer.
type feed struct {
	s         *Server
	q         *request
	a         changesArgs
	ctx       context.Context
	fw        *feedWriter
	since     string
	remaining int64
	more      bool // the last page said there are changes after since
	rows      int  // rows written in a normal/longpoll answer
	opened    bool // `{"results":[` written
	buf       []byte
}

// open starts a normal or longpoll answer.
func (f *feed) open() {
	if !f.opened {
		f.opened = true
		f.fw.write([]byte("{\"results\":[\n"))
	}
}

// fetch reads the next page after f.since (without waiting).
func (f *feed) fetch() ([]engine.Change, error) {
	n := min(f.remaining, changesPageSize)
	if n == 0 {
		n = 1 // limit=0: only learn whether anything is pending
	}
	page, err := f.q.st.Changes(f.ctx, engine.ChangesRequest{Since: f.since, Limit: int(n), Selector: f.a.selector})
	if err != nil {
		return nil, err
	}
	f.more = page.Pending != 0
	if f.remaining == 0 {
		f.more = f.more || len(page.Results) > 0
		return nil, nil // last_seq stays at since
	}
	if page.LastSeq != "" {
		f.since = page.LastSeq
	}
	rows := page.Results
	if f.a.designOnly {
		kept := rows[:0]
		for _, c := range rows {
			if isDesign(c.ID) {
				kept = append(kept, c)
			}
		}
		rows = kept
	}
	return rows, nil
}

// wait blocks until a change may exist after f.since, d passes, or ctx
// ends. It reports whether it woke for a change.
func (f *feed) wait(d time.Duration) (bool, error) {
	wctx, cancel := context.WithTimeout(f.ctx, d)
	defer cancel()
	_, err := f.q.st.Changes(wctx, engine.ChangesRequest{Since: f.since, Limit: 1, Selector: f.a.selector, Wait: true})
	switch {
	case err == nil:
		return true, nil
	case f.ctx.Err() != nil:
		return false, f.ctx.Err()
	case errors.Is(err, context.DeadlineExceeded):
		return false, nil
	}
	return false, err
}

// appendRow appends one change row (with its document if asked).
func (f *feed) appendRow(b []byte, c engine.Change) []byte {
	b = append(b, `{"seq":`...)
	b = appendString(b, c.Seq)
	b = append(b, `,"id":`...)
	b = appendString(b, c.ID)
	b = append(b, `,"changes":[`...)
	revs := c.Revs
	if !f.a.allDocs && len(revs) > 1 {
		revs = revs[:1]
	}
	for i, r := range revs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"rev":`...)
		b = appendString(b, r)
		b = append(b, '}')
	}
	b = append(b, ']')
	if c.Deleted {
		b = append(b, `,"deleted":true`...)
	}
	if f.a.includeDocs {
		b = append(b, `,"doc":`...)
		var doc []byte
		if len(c.Revs) > 0 {
			doc, _ = f.q.st.Get(f.ctx, c.ID, store.GetOptions{Rev: c.Revs[0], Conflicts: f.a.conflicts})
		}
		if doc == nil {
			b = append(b, "null"...) // changed since the row was read: a later row carries it
		} else {
			b = append(b, doc...)
		}
	}
	return append(b, '}')
}

// pending is the number of changes after f.since: exact (0) at the end of
// the feed, otherwise an upper bound from the update sequence when the
// store's sequences are integers, else 1.
func (f *feed) pending() int64 {
	if !f.more {
		return 0
	}
	info, err := f.q.st.Info(f.ctx)
	if err == nil {
		u, e1 := strconv.ParseUint(info.UpdateSeq, 10, 64)
		l, e2 := strconv.ParseUint(f.since, 10, 64)
		if e1 == nil && e2 == nil && u > l {
			return int64(min(u-l, 1<<53))
		}
	}
	return 1
}

func (f *feed) lastSeq() string {
	if f.since == "" {
		return "0"
	}
	return f.since
}

func (f *feed) run() *apiError {
	rows, err := f.fetch()
	if err != nil {
		return asAPIError(err)
	}
	switch f.a.feed {
	case "continuous":
		return f.continuous(rows)
	case "longpoll":
		if len(rows) == 0 && f.remaining > 0 && !f.more {
			return f.longpollWait()
		}
	}
	return f.normal(rows)
}

// normal writes rows and every following page up to the limit, as one
// JSON object.
func (f *feed) normal(rows []engine.Change) *apiError {
	f.open()
	for {
		f.writeRows(rows)
		if !f.more || f.remaining == 0 || f.fw.err != nil {
			break
		}
		var err error
		if rows, err = f.fetch(); err != nil {
			return asAPIError(err) // the answer has started: Server.fail aborts it
		}
	}
	f.finishObject()
	return nil
}

func (f *feed) writeRows(rows []engine.Change) {
	for _, c := range rows {
		b := f.buf[:0]
		if f.rows > 0 {
			b = append(b, ",\n"...)
		}
		b = f.appendRow(b, c)
		f.buf = b
		f.fw.write(b)
		f.rows++
		f.remaining--
	}
}

func (f *feed) finishObject() {
	b := append(f.buf[:0], "\n],\n\"last_seq\":"...)
	b = appendString(b, f.lastSeq())
	b = append(b, `,"pending":`...)
	b = strconv.AppendInt(b, f.pending(), 10)
	b = append(b, "}\n"...)
	f.fw.write(b)
	f.fw.flush()
}

// longpollWait waits for the first change, sending heartbeat newlines,
// and answers like a normal feed; on timeout (or server close) it answers
// no rows and the last sequence.
func (f *feed) longpollWait() *apiError {
	deadline := time.Now().Add(f.a.timeout)
	for {
		d := time.Until(deadline)
		if f.a.heartbeat > 0 {
			d = f.a.heartbeat
		}
		woke, err := f.wait(max(d, 0))
		if err != nil {
			if f.ctx.Err() != nil && f.q.r.Context().Err() != nil {
				return nil // the client went away
			}
			if f.ctx.Err() == nil {
				return f.abortOrError(err)
			}
			// The server is closing: answer what there is.
			f.ctx = context.WithoutCancel(f.ctx)
			woke = true
		}
		timedOut := f.a.heartbeat == 0 && !time.Now().Before(deadline)
		if woke || timedOut || f.s.ctx.Err() != nil {
			rows, err := f.fetch()
			if err != nil {
				return f.abortOrError(err)
			}
			if len(rows) > 0 || timedOut || f.s.ctx.Err() != nil {
				return f.normal(rows)
			}
			continue
		}
		// Heartbeat: the answer starts, then a newline keeps it alive.
		f.open()
		f.fw.write([]byte("\n"))
		f.fw.flush()
		if f.fw.err != nil {
			return nil
		}
	}
}

// abortOrError answers err; once the answer has started, Server.fail
// aborts the connection instead.
func (f *feed) abortOrError(err error) *apiError {
	return asAPIError(err)
}

// continuous writes one JSON object per line as changes happen, blank
// heartbeat lines, and ends with {"last_seq","pending"} at the limit, on
// timeout (without heartbeat) or when the server closes.
func (f *feed) continuous(rows []engine.Change) *apiError {
	f.fw.start()
	for {
		for _, c := range rows {
			b := f.appendRow(f.buf[:0], c)
			f.buf = append(b, '\n')
			f.fw.write(f.buf)
			f.remaining--
		}
		f.fw.flush()
		if f.fw.err != nil {
			return nil
		}
		if f.remaining <= 0 {
			break
		}
		if f.more {
			var err error
			if rows, err = f.fetch(); err != nil {
				return f.abortOrError(err)
			}
			continue
		}
		rows = nil
		deadline := time.Now().Add(f.a.timeout)
		stop := false
		for !stop {
			d := time.Until(deadline)
			if f.a.heartbeat > 0 {
				d = f.a.heartbeat
			}
			woke, err := f.wait(max(d, 0))
			if err != nil {
				if f.q.r.Context().Err() != nil {
					return nil // the client went away
				}
				if f.s.ctx.Err() == nil {
					return f.abortOrError(err)
				}
				f.ctx = context.WithoutCancel(f.ctx) // closing: finish the answer
				stop = true
				break
			}
			if woke {
				if rows, err = f.fetch(); err != nil {
					return f.abortOrError(err)
				}
				if len(rows) > 0 || f.more {
					break
				}
				continue
			}
			if f.a.heartbeat == 0 {
				// Timed out: one last look, then end.
				if rows, err = f.fetch(); err != nil {
					return f.abortOrError(err)
				}
				stop = len(rows) == 0 && !f.more
				break
			}
			f.fw.write([]byte("\n"))
			f.fw.flush()
			if f.fw.err != nil {
				return nil
			}
		}
		if stop {
			break
		}
	}
	b := append(f.buf[:0], `{"last_seq":`...)
	b = appendString(b, f.lastSeq())
	b = append(b, `,"pending":`...)
	b = strconv.AppendInt(b, f.pending(), 10)
	b = append(b, "}\n"...)
	f.fw.write(b)
	f.fw.flush()
	return nil
}

// feedWriter writes a streamed answer: buffered, flushed to the client
// at each batch and heartbeat. After a write error (the client went away)
// it writes nothing more.
type feedWriter struct {
	w       *respWriter
	rc      *http.ResponseController
	bw      *bufio.Writer
	started bool
	err     error
}

func (fw *feedWriter) start() {
	if fw.started {
		return
	}
	fw.started = true
	h := fw.w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Accel-Buffering", "no") // reverse proxies: do not buffer a feed
	fw.w.WriteHeader(http.StatusOK)
	fw.bw = bufio.NewWriterSize(fw.w, 32<<10)
}

func (fw *feedWriter) write(b []byte) {
	fw.start()
	if fw.err == nil {
		_, fw.err = fw.bw.Write(b)
	}
}

func (fw *feedWriter) flush() {
	fw.start()
	if fw.err == nil {
		fw.err = fw.bw.Flush()
	}
	if fw.err == nil {
		if err := fw.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
			fw.err = err
		}
	}
}
