package couchapi

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/livesync-go/livesync-go/engine"
	"github.com/livesync-go/livesync-go/engine/store"
)

// apiError is an answer in CouchDB's error form {"error","reason"}.
type apiError struct {
	status int
	name   string
	reason string
	cause  error // logged for 5xx, never sent
	// retryAfter, if set, is sent as the Retry-After header (429).
	retryAfter time.Duration
}

func (e *apiError) Error() string { return e.name + ": " + e.reason }

func errorf(status int, name, reason string) *apiError {
	return &apiError{status: status, name: name, reason: reason}
}

func badRequest(reason string) *apiError { return errorf(http.StatusBadRequest, "bad_request", reason) }

// CouchDB's messages, kept verbatim where clients may match them.
var (
	errInvalidJSON   = badRequest("invalid UTF-8 JSON")
	errNotObject     = badRequest("Request body must be a JSON object")
	errDocNotObject  = badRequest("Document must be a JSON object")
	errInvalidRev    = badRequest("Invalid rev format")
	errDBMissing     = errorf(http.StatusNotFound, "not_found", "Database does not exist.")
	errMissing       = errorf(http.StatusNotFound, "not_found", "missing")
	errDeleted       = errorf(http.StatusNotFound, "not_found", "deleted")
	errConflict      = errorf(http.StatusConflict, "conflict", "Document update conflict.")
	errTooLarge      = errorf(http.StatusRequestEntityTooLarge, "too_large", "the request entity is too large")
	errUnauthorized  = errorf(http.StatusUnauthorized, "unauthorized", "Name or password is incorrect.")
	errAuthRequired  = errorf(http.StatusUnauthorized, "unauthorized", "Authentication required.")
	errDBForbidden   = errorf(http.StatusForbidden, "forbidden", "You are not allowed to access this db.")
	errNotAdmin      = errorf(http.StatusForbidden, "forbidden", "You are not a server admin.")
	errDesignAdmin   = errorf(http.StatusForbidden, "forbidden", "Only admins may write design documents.")
	errIllegalDocID  = errorf(http.StatusBadRequest, "illegal_docid", "Only reserved document ids may start with underscore.")
	errShuttingDown  = errorf(http.StatusServiceUnavailable, "service_unavailable", "The server is shutting down.")
	errFileExists    = errorf(http.StatusPreconditionFailed, "file_exists", "The database could not be created, the file already exists.")
	errNotFoundRoute = errorf(http.StatusNotFound, "not_found", "missing")
)

func illegalDBName(name string) *apiError {
	return errorf(http.StatusBadRequest, "illegal_database_name", "Name: '"+name+
		"'. Only lowercase characters (a-z), digits (0-9), and any of the characters _, $, (, ), +, -, and / are allowed. Must begin with a letter.")
}

func methodNotAllowed(allowed string) *apiError {
	return errorf(http.StatusMethodNotAllowed, "method_not_allowed", "Only "+allowed+" allowed")
}

// asAPIError maps an error of a Store or Databases to an answer.
func asAPIError(err error) *apiError {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, ErrForbidden):
		return errorf(http.StatusForbidden, "forbidden", "The document was refused.")
	case errors.Is(err, store.ErrConflict):
		return errConflict
	case errors.Is(err, engine.ErrTooLarge):
		return errTooLarge
	case errors.Is(err, store.ErrInvalid), errors.Is(err, engine.ErrMalformed), errors.Is(err, engine.ErrUnsupported):
		return badRequest(err.Error())
	case errors.Is(err, ErrIllegalName):
		return badRequest(err.Error())
	case errors.Is(err, ErrExists):
		return errFileExists
	case errors.Is(err, store.ErrClosed):
		// The database was deleted while the request ran.
		return errDBMissing
	case errors.Is(err, engine.ErrNotFound):
		return errMissing
	case errors.Is(err, store.ErrStorageFull):
		return &apiError{status: http.StatusInsufficientStorage, name: "insufficient_storage",
			reason: "The server has no space left to store this; nothing of the request was stored. Retry once space is freed on the server's data volume.", cause: err}
	case errors.Is(err, store.ErrUnavailable):
		return &apiError{status: http.StatusServiceUnavailable, name: "service_unavailable",
			reason: "The server's database cannot be reached now; nothing of the request was stored. Retry later.", cause: err}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &apiError{status: http.StatusServiceUnavailable, name: "service_unavailable", reason: "The request was cancelled.", cause: err}
	}
	return &apiError{status: http.StatusInternalServerError, name: "internal_server_error", reason: "The server could not complete the request.", cause: err}
}

// docError is the per-document error name and reason of a _bulk_docs row.
func docError(err error) (name, reason string) {
	switch {
	case errors.Is(err, ErrForbidden):
		return "forbidden", err.Error()
	case errors.Is(err, store.ErrConflict):
		return "conflict", "Document update conflict."
	case errors.Is(err, store.ErrInvalid), errors.Is(err, engine.ErrMalformed):
		return "bad_request", err.Error()
	}
	ae := asAPIError(err)
	return ae.name, ae.reason
}
