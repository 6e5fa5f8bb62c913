package main

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// p2pPeersRoute is the admin route that approves (PUT or POST, optional
// body {"device": "laptop"}) and revokes (DELETE) a peer of a group at
// run time; GET /_p2p/{db}/{group} shows the group as /status does.
// Changes go to the group's peer book file at once; a revoked peer's
// connections are closed. Only admins may call them, whatever
// metrics_public says.
const (
	p2pPeersRoute = "/_p2p/{db}/{group}/peers/{peer}"
	p2pGroupRoute = "/_p2p/{db}/{group}"
)

// maxApproveBody bounds the body of an approval.
const maxApproveBody = 4 << 10

// mountP2P adds /_nostr and the /_p2p admin routes to mux.
func (r *relay) mountP2P(mux *http.ServeMux) {
	if r.p2p == nil {
		return
	}
	if r.p2p.nostr != nil {
		// Public: it accepts only discovery events, within its limits
		// ([nostr]). Mounted as is: its websockets take over the
		// connection.
		mux.Handle(nostrPath, r.p2p.nostr)
	}
	if len(r.p2p.groups) == 0 {
		return
	}
	admin := func(route string, h http.HandlerFunc) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			start := time.Now()
			sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
			defer func() { r.metrics.onRequest(route, sw.status, time.Since(start)) }()
			switch r.isAdmin(req) {
			case http.StatusOK:
				h(sw, req)
			case http.StatusForbidden:
				writeJSONStatus(sw, http.StatusForbidden, map[string]string{"error": "forbidden", "reason": "You are not a server admin."})
			default:
				sw.Header().Set("WWW-Authenticate", `Basic realm="livesync-relay"`)
				writeJSONStatus(sw, http.StatusUnauthorized, map[string]string{"error": "unauthorized", "reason": "Admin credentials are required."})
			}
		})
	}
	mux.Handle("PUT "+p2pPeersRoute, admin(p2pPeersRoute, r.p2pApprove))
	mux.Handle("POST "+p2pPeersRoute, admin(p2pPeersRoute, r.p2pApprove))
	mux.Handle("DELETE "+p2pPeersRoute, admin(p2pPeersRoute, r.p2pRevoke))
	mux.Handle("GET "+p2pGroupRoute, admin(p2pGroupRoute, r.p2pGroupStatus))
}

// p2pTarget resolves the group and the peer id of a request, answering
// the error itself when it returns nil.
func (r *relay) p2pTarget(w http.ResponseWriter, req *http.Request, withPeer bool) (*p2pGroup, peer.ID) {
	g := r.p2p.find(req.PathValue("db"), req.PathValue("group"))
	if g == nil {
		writeJSONStatus(w, http.StatusNotFound, map[string]string{"error": "not_found", "reason": "no such p2p group of that database in the configuration"})
		return nil, ""
	}
	if !withPeer {
		return g, ""
	}
	id, err := parsePeerID(req.PathValue("peer"))
	if err != nil {
		writeJSONStatus(w, http.StatusBadRequest, map[string]string{"error": "bad_request", "reason": "not a libp2p peer id"})
		return nil, ""
	}
	return g, id
}

// p2pApprove approves a peer (usually a pending one) in a group.
func (r *relay) p2pApprove(w http.ResponseWriter, req *http.Request) {
	g, id := r.p2pTarget(w, req, true)
	if g == nil {
		return
	}
	if req.Method == http.MethodPost && !isJSON(req) {
		// A browser sends a cross-site POST without asking first only
		// as a form or plain text: an admin's browser session must not
		// approve a peer for another site.
		writeJSONStatus(w, http.StatusUnsupportedMediaType, map[string]string{"error": "bad_content_type", "reason": "POST needs Content-Type: application/json"})
		return
	}
	var body struct {
		Device string `json:"device"`
	}
	b, err := io.ReadAll(io.LimitReader(req.Body, maxApproveBody+1))
	if err == nil && len(b) > maxApproveBody {
		err = errors.New("body too large")
	}
	if err == nil && len(b) > 0 {
		err = json.Unmarshal(b, &body)
	}
	if err != nil || len(body.Device) > maxDeviceName {
		writeJSONStatus(w, http.StatusBadRequest, map[string]string{"error": "bad_request", "reason": `want no body or {"device": "name"} (at most 128 bytes)`})
		return
	}
	if other := r.p2p.approvedElsewhere(g, id); other != "" {
		writeJSONStatus(w, http.StatusConflict, map[string]string{"error": "conflict",
			"reason": "the peer is approved in group " + other + "; a peer can be approved in one group of the relay: revoke it there first"})
		return
	}
	if err := g.book.Approve(id, body.Device); err != nil {
		r.log.Error("approving a peer", "db", g.db, "group", g.name, "peer", id.String(), "err", err)
		writeJSONStatus(w, http.StatusInternalServerError, map[string]string{"error": "internal", "reason": "the peer book could not be written"})
		return
	}
	device, _ := g.book.Allow().Device(id)
	r.log.Info("p2p peer approved", "db", g.db, "group", g.name, "peer", id.String(), "device", device)
	writeJSONStatus(w, http.StatusOK, map[string]any{"ok": true, "peer": id.String(), "device": device, "approved": true})
}

// isJSON reports whether req's body is declared application/json.
func isJSON(req *http.Request) bool {
	mt, _, err := mime.ParseMediaType(req.Header.Get("Content-Type"))
	return err == nil && mt == "application/json"
}

// p2pRevoke withdraws a peer's approval (or forgets a pending peer); the
// group closes its connections.
func (r *relay) p2pRevoke(w http.ResponseWriter, req *http.Request) {
	g, id := r.p2pTarget(w, req, true)
	if g == nil {
		return
	}
	if err := g.book.Revoke(id); err != nil {
		r.log.Error("revoking a peer", "db", g.db, "group", g.name, "peer", id.String(), "err", err)
		writeJSONStatus(w, http.StatusInternalServerError, map[string]string{"error": "internal", "reason": "the peer book could not be written"})
		return
	}
	r.log.Info("p2p peer revoked", "db", g.db, "group", g.name, "peer", id.String())
	writeJSONStatus(w, http.StatusOK, map[string]any{"ok": true, "peer": id.String(), "approved": false})
}

// p2pGroupStatus answers GET /_p2p/{db}/{group}.
func (r *relay) p2pGroupStatus(w http.ResponseWriter, req *http.Request) {
	g, _ := r.p2pTarget(w, req, false)
	if g == nil {
		return
	}
	writeJSONStatus(w, http.StatusOK, r.p2p.status(g))
}
