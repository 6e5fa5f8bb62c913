package main

import (
	"fmt"
	"net/http"
	"time"

	"github.com/livesync-go/livesync-go/adapters/couchdb/couchapi"
	ebridge "github.com/livesync-go/livesync-go/engine/bridge"
	"github.com/livesync-go/livesync-go/engine/holdback"
)

// heldListed is how many held documents /status lists per database: the
// first by document id. held_documents counts them all, as /metrics does,
// so the page stays small whatever clients push.
const heldListed = 100

// statusDoc is the body of GET /status.
type statusDoc struct {
	Server             string     `json:"server"`
	CouchDBVersion     string     `json:"couchdb_version"`
	UUID               string     `json:"uuid"`
	URL                string     `json:"url"`
	Started            time.Time  `json:"started"`
	UptimeSeconds      int64      `json:"uptime_seconds"`
	ReplicationClients int        `json:"replication_clients"`
	Databases          []dbStatus `json:"databases"`
}

// dbStatus is one database in /status.
type dbStatus struct {
	Name string `json:"name"`
	// Mode is the hold-back mode (holdback, holdback-decrypt,
	// passthrough-obfuscated) and ModeExplained says it in words.
	Mode                 string `json:"mode"`
	ModeExplained        string `json:"mode_explained"`
	PassphraseConfigured bool   `json:"passphrase_configured"`
	// Store is where the database is kept: "bbolt" (a file in the data
	// folder, StoreBytes its size) or "couchdb" (StoreLocation, shared
	// with every relay in front of it; Shared says how they coordinate).
	Store         string        `json:"store"`
	StoreLocation string        `json:"store_location,omitempty"`
	StoreBytes    int64         `json:"store_bytes"`
	Shared        *sharedStatus `json:"shared,omitempty"`
	// BridgeNote says why a shared database's upstreams are stopped here.
	BridgeNote string `json:"bridge_note,omitempty"`
	// Held lists at most heldListed held documents, the first by id;
	// HeldDocuments counts them all and HeldNote says when the list is
	// cut.
	Held          []heldStatus    `json:"held"`
	HeldDocuments int             `json:"held_documents"`
	HeldNote      string          `json:"held_note,omitempty"`
	Holdback      holdbackStatus  `json:"holdback"`
	Purgatory     purgatoryStatus `json:"purgatory"`
	// Upstreams are the remotes the database is bridged to (empty
	// without any), and Hunt the hunt for held documents' chunks across
	// them and the groups' peers (absent without upstreams or groups).
	Upstreams []ebridge.UpstreamStatus `json:"upstreams"`
	Hunt      *ebridge.HuntStatus      `json:"hunt,omitempty"`
	// P2P are the peer-to-peer groups the relay serves the database to
	// (empty without any).
	P2P []p2pStatus `json:"p2p"`
	// LiveSyncP2P are the LiveSync P2P rooms the relay is a device of
	// (empty without any).
	LiveSyncP2P []lsp2pStatus `json:"livesync_p2p"`
}

// sharedStatus is how the relays in front of one CouchDB database
// coordinate, as this relay sees it: one of them, the leader, holds the
// hunt's lease and alone runs the upstreams and the hunt.
type sharedStatus struct {
	// Leader is true while this relay holds the lease; Self is this
	// relay's name in the lease, Holder who holds it (Self or another
	// relay; "" when free or not read yet), until LeaseUntil unless
	// renewed.
	Leader     bool       `json:"leader"`
	Self       string     `json:"self"`
	Holder     string     `json:"holder"`
	LeaseUntil *time.Time `json:"lease_until"`
	// Takeovers counts the times this relay became the leader;
	// Refreshes the reads of the holds other relays made; Arrivals the
	// chunk ids seen arriving in the database's changes feed (written
	// through any relay or by an upstream).
	Takeovers uint64 `json:"takeovers"`
	Refreshes uint64 `json:"refreshes"`
	Arrivals  uint64 `json:"arrivals"`
	// LastError is what fails now in the coordination (the lease, the
	// feed or the refresh: CouchDB unreachable, say), "" when everything
	// works; LastErrorAt is when the latest failure happened (null if
	// none ever did).
	LastError   string     `json:"last_error"`
	LastErrorAt *time.Time `json:"last_error_at"`
}

func sharedStatusOf(s *couchapi.SharedStatus) *sharedStatus {
	if s == nil {
		return nil
	}
	return &sharedStatus{Leader: s.Leader, Self: s.Self, Holder: s.Holder, LeaseUntil: msTime(s.LeaseUntil),
		Takeovers: s.Takeovers, Refreshes: s.Refreshes, Arrivals: s.Arrivals, LastError: s.LastError, LastErrorAt: msTime(s.LastErrorAt)}
}

// msTime is t in UTC to the millisecond; nil for the zero time.
func msTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC().Truncate(time.Millisecond)
	return &u
}

// heldStatus is one held document: why it is not served yet.
type heldStatus struct {
	Doc           string    `json:"doc"`
	Revisions     []string  `json:"revisions"`
	MissingChunks int       `json:"missing_chunks"`
	State         string    `json:"state"`
	Reason        string    `json:"reason"`
	Since         time.Time `json:"since"`
	Deadline      time.Time `json:"deadline"`
	Source        string    `json:"source"`
}

type holdbackStatus struct {
	// MaxHeldDocuments and MaxHeldDocumentsPerUser are the limits in
	// force ([holdback]); Refused counts metadata refused at them and
	// HeldByUser the held documents counted against each user.
	MaxHeldDocuments        int            `json:"max_held_documents"`
	MaxHeldDocumentsPerUser int            `json:"max_held_documents_per_user"`
	Refused                 uint64         `json:"refused"`
	HeldByUser              map[string]int `json:"held_by_user"`
	HeldRevisions           int            `json:"held_revisions"`
	WrittenThrough          uint64         `json:"written_through"`
	Holds                   uint64         `json:"holds"`
	Released                uint64         `json:"released"`
	Dropped                 uint64         `json:"dropped"`
	Unreadable              uint64         `json:"unreadable"`
	Undecodable             uint64         `json:"undecodable"`
	SaveErrors              uint64         `json:"save_errors"`
}

type purgatoryStatus struct {
	Active         int    `json:"active"`
	SoftExpired    int    `json:"soft_expired"`
	Remembered     int    `json:"remembered"`
	Releases       uint64 `json:"releases"`
	SoftExpiries   uint64 `json:"soft_expiries"`
	Expiries       uint64 `json:"expiries"`
	Revivals       uint64 `json:"revivals"`
	VerifyFailures uint64 `json:"verify_failures"`
	ReleaseErrors  uint64 `json:"release_errors"`
	Superseded     uint64 `json:"superseded"`
}

func explainMode(m holdback.Mode, passphrase bool) string {
	switch {
	case m == holdback.ModeDecrypt:
		return "the vault passphrase is configured: metadata is decrypted in memory to decide what to hold back"
	case passphrase:
		return "a passphrase is configured but the vault has no salt yet (written by the first client): metadata with readable chunk lists is held back"
	case m == holdback.ModePassthroughObfuscated:
		return "the vault obfuscates paths and no passphrase is configured: its metadata passes unheld, as a plain CouchDB would serve it"
	}
	return "metadata whose chunks are not all stored is held back until they are"
}

// status answers GET /status.
func (r *relay) status(w http.ResponseWriter, _ *http.Request) {
	now := time.Now()
	doc := statusDoc{
		Server: "livesync-relay", CouchDBVersion: couchapi.CouchDBVersion, UUID: r.uuid, URL: r.url,
		Started: r.started.UTC().Truncate(time.Second), UptimeSeconds: int64(now.Sub(r.started).Seconds()),
		ReplicationClients: r.metrics.openFeeds(), Databases: []dbStatus{},
	}
	for _, v := range r.dbs.Opened() {
		// The list first: a document gone from it was released (or
		// dropped) before the counters are read, so they count it.
		held, total := v.HeldFirst(heldListed)
		s := v.Stats()
		size, _ := r.dbs.fileSize(v.Name)
		d := dbStatus{
			Name: v.Name, Mode: string(s.Mode), ModeExplained: explainMode(s.Mode, v.HasPassphrase()),
			PassphraseConfigured: v.HasPassphrase(), Store: r.dbs.storeKind(v.Name), StoreBytes: size,
			Shared: sharedStatusOf(v.SharedStatus()), Held: []heldStatus{}, Upstreams: []ebridge.UpstreamStatus{},
			Holdback: holdbackStatus{
				HeldRevisions: s.Held, WrittenThrough: s.WrittenThrough, Holds: s.Holds, Released: s.Released,
				Dropped: s.Dropped, Unreadable: s.Unreadable, Undecodable: s.Undecodable, SaveErrors: s.SaveErrors,
				MaxHeldDocuments: s.MaxHeldDocuments, MaxHeldDocumentsPerUser: s.MaxHeldPerOwner, Refused: s.Refused,
				HeldByUser: s.HeldByOwner,
			},
			Purgatory: purgatoryStatus{
				Active: s.Purgatory.Active, SoftExpired: s.Purgatory.SoftExpired, Remembered: s.Purgatory.Remembered,
				Releases: s.Purgatory.Releases, SoftExpiries: s.Purgatory.SoftExpiries, Expiries: s.Purgatory.Expiries,
				Revivals: s.Purgatory.Revivals, VerifyFailures: s.Purgatory.VerifyFailures,
				ReleaseErrors: s.Purgatory.ReleaseErrors, Superseded: s.Purgatory.Superseded,
			},
		}
		d.P2P = r.p2p.statuses(v.Name)
		d.LiveSyncP2P = r.lsp2p.statuses(v.Name)
		if d.Store == storeCouch {
			d.StoreLocation = r.dbs.location(v.Name)
		}
		bv, bridged := r.dbs.tally.view(v.Name, v.Bridge())
		if bridged {
			d.Upstreams, d.Hunt = bv.ups, &bv.hunt
		}
		if d.Shared != nil && !d.Shared.Leader && len(r.s.upstreams[v.Name]) > 0 {
			d.BridgeNote = "another relay in front of this CouchDB database holds the lease (shared.holder) and runs the upstreams and the hunt; " +
				"this relay's counters are those of the times it led"
		}
		if d.Holdback.HeldByUser == nil {
			d.Holdback.HeldByUser = map[string]int{}
		}
		d.HeldDocuments = total
		if len(held) < total {
			d.HeldNote = fmt.Sprintf("%d of %d held documents listed (the first by id); held_documents and /metrics count them all", len(held), total)
		}
		for _, h := range held {
			src := h.Source
			switch {
			case src == "":
				src = "client push"
			case bridged:
				src = "upstream " + bv.b.SourceName(src)
			}
			d.Held = append(d.Held, heldStatus{
				Doc: h.Doc, Revisions: h.Revisions, MissingChunks: h.Missing, State: h.State.String(),
				Reason: h.Reason, Since: h.Since.UTC(), Deadline: h.Deadline.UTC(), Source: src,
			})
		}
		doc.Databases = append(doc.Databases, d)
	}
	writeJSONStatus(w, http.StatusOK, doc)
}
