package couchapi

import (
	"io"
	"mime"
	"net/http"
	"time"
)

// maxPublicBody caps the body of a request anyone may send (POST
// /_session, a login form).
const maxPublicBody = 64 << 10

// hasBody reports whether r declares or streams a body.
func hasBody(r *http.Request) bool {
	return r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0
}

// refuseBody prepares an answer sent without reading r's body: the
// connection closes after it, at once. Without this, Go's server would
// wait for up to 256 KiB of a body it was promised before closing or
// reusing the connection, so that a client declaring a body and never
// sending it would hold the connection for as long as it likes.
func refuseBody(w http.ResponseWriter, r *http.Request) {
	if !hasBody(r) {
		return
	}
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now()) // not supported by every ResponseWriter (tests): the header suffices there
}

// refuseAuthenticatedBody prepares an answer to an authenticated
// request refused without reading its body (too large, not JSON): the
// connection closes after it, but Go's server may first read what the
// client is still sending (up to 256 KiB), within bodyTimeout, so that
// the client reads the answer instead of a broken pipe. An anonymous or
// refused caller gets refuseBody: nothing is waited for.
func (s *Server) refuseAuthenticatedBody(w http.ResponseWriter, r *http.Request) {
	if !hasBody(r) {
		return
	}
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.bodyTimeout))
}

// bodyDeadline gives r's body bodyTimeout to arrive in full. The deadline
// is lifted once the body has been read to its end: a longpoll or
// continuous feed then runs as long as it needs (Go's server watches the
// connection for the client going away, and a read deadline would end
// the feed). A body that misses it is answered 408 and the connection
// closes.
func (s *Server) bodyDeadline(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	if err := rc.SetReadDeadline(time.Now().Add(s.bodyTimeout)); err != nil {
		return
	}
	r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
}

// deadlineBody lifts the read deadline when the body ends.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// errContentType is CouchDB's answer to a write whose body is not JSON.
var errContentType = errorf(http.StatusUnsupportedMediaType, "bad_content_type", "Content-Type must be application/json")

// checkContentType refuses a POST or PUT body that is not declared as
// application/json (any parameters, e.g. charset, allowed), as CouchDB
// refuses it on _bulk_docs, _all_docs, _changes, POST /{db} and the
// others that take JSON. POST /_session also takes
// application/x-www-form-urlencoded (form allows it), as CouchDB's does.
// A browser sends a cross-site request without a CORS preflight only
// with text/plain, multipart/form-data or a form encoding, so no other
// site can make a logged-in browser write. Bodyless requests are not
// checked. PouchDB and the plugin send application/json; attachments
// (PUT with another type) are not served by this server.
func checkContentType(r *http.Request, form bool) *apiError {
	if (r.Method != http.MethodPost && r.Method != http.MethodPut) || !hasBody(r) {
		return nil
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch {
	case err != nil:
	case mt == "application/json":
		return nil
	case form && mt == "application/x-www-form-urlencoded":
		return nil
	}
	if form {
		return errorf(http.StatusUnsupportedMediaType, "bad_content_type", "Content-Type must be application/json or application/x-www-form-urlencoded")
	}
	return errContentType
}
