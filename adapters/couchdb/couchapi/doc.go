// Package couchapi serves the CouchDB-protocol HTTP API of the relay: the
// subset of CouchDB 3 that PouchDB replication and the Self-hosted LiveSync
// plugin use (engine/FORMAT.md §5), over engine/store.Store
// databases. It is a library so that cmd/livesync-relay and a later
// Workers build share one handler.
//
// A Server is an http.Handler:
//
//	dbs, err := boltdir.Open("./livesync-data", boltstore.Options{Options: couchapi.StoreOptions(0)})
//	...
//	defer dbs.Close()
//	api, err := couchapi.New(couchapi.Config{
//		Databases:   dbs,
//		Users:       []couchapi.User{{Name: "alice", Password: os.Getenv("RELAY_PASSWORD"), Databases: []string{"vault"}}},
//		CORSOrigins: []string{"app://obsidian.md", "capacitor://localhost", "http://localhost"},
//	})
//	...
//	srv := &http.Server{Addr: "127.0.0.1:5984", Handler: api}
//	srv.RegisterOnShutdown(func() { api.Close() }) // end changes feeds
//	...
//	srv.Shutdown(ctx)
//
// Routes: GET / (welcome), /_up, /_uuids, /_all_dbs, /_session (Basic and
// cookie login), the read-only server configuration the plugin's setup
// wizard checks (/_node/_local/_config[/section[/key]]), and per database
// GET/HEAD/PUT/DELETE /{db}, _changes (normal, longpoll, continuous;
// _selector, _doc_ids and _design filters; include_docs), _revs_diff,
// _bulk_docs (new_edits true and false), _bulk_get, _all_docs (GET and
// POST keys), documents (rev, revs, revs_info, conflicts, open_revs with
// latest, JSON or multipart/mixed), _local documents with CouchDB's "0-N"
// revisions, _ensure_full_commit, and revision history as CouchDB keeps
// it: earlier revisions' bodies are served (?rev=, open_revs, revs_info
// "available") until POST /{db}/_compact drops them, and GET/PUT
// /{db}/_revs_limit (default 1000) bounds each branch (see StoreOptions). Design documents are stored and served as
// documents (written by admins only) but never run: their views, shows
// and filters are 404. Everything else is a CouchDB-shaped 404 or 405.
// Attachments, Mango _find, JWT and proxy authentication are not served.
//
// Writes: the documents of a _bulk_docs request (new_edits true or false)
// are one atomic store call, its _local documents apart; conflicts, refusals and documents over the store's limits (an
// id over store.MaxIDLength, a revision over store.MaxRevLength) are
// per-document rows, and a storage failure leaves nothing of the request.
// A full disk (store.ErrStorageFull) is 507 insufficient_storage.
//
// Reads: the revisions an open_revs GET or a _bulk_get names of one
// document are read from one load of its revision tree
// (store.Store.GetRevs), so a document with many conflicting leaves costs
// time linear in them; one request names at most MaxOpenRevs revisions
// and its answer carries at most MaxAnswerRevs documents (400 otherwise).
//
// Compression: answers are gzipped for clients that send Accept-Encoding:
// gzip when they are JSON (or multipart/mixed) of at least
// CompressMinBytes and not a longpoll or continuous _changes feed, whose
// rows and heartbeats are flushed plain as they are written;
// Config.Compression = CompressionOff turns it off. Request bodies sent
// with Content-Encoding: gzip are decompressed, the request size limit
// applying to the decompressed size.
//
// Security: every route except /, /_up and /_session needs a valid user
// (Basic or the AuthSession cookie) unless Config allows anonymous reads or
// writes; a wrong password is a 401 with no WWW-Authenticate header unless
// Config.WWWAuthenticate asks for one (a browser would show a login
// dialog); a user not allowed on a database gets 403. Server.Authenticate
// applies the same checks for routes served beside the Server. Passwords are kept as
// PBKDF2-SHA256 hashes (CouchDB's "-pbkdf2:sha256-" format is accepted as
// is); a successful check is remembered for a few minutes so Basic auth
// does not cost a key derivation per request. Request bodies over
// Config.MaxRequestBytes are refused with 413 before anything is stored,
// chunked bodies included.
//
// Databases is the port to the storage, injected through Config:
// NewMemoryDatabases keeps stores in memory, boltdir.Open (package
// adapters/couchdb/couchapi/boltdir) one bbolt file per database. A decorator around a
// Databases (for example one that wraps each opened Store) changes what is
// served without touching this package; a Store that wants a document
// refused answers with an error wrapping ErrForbidden.
// HeldDatabases is the relay's decorator: it serves every database
// through a hold-back (engine/holdback.Served), so that no client sees a
// note before its chunks, and bridges a database to its upstreams
// (engine/bridge) when HeldConfig.Bridge builds a bridge for it.
//
// Long-running feeds (longpoll and continuous _changes) end when the client
// disconnects or Close is called; Close waits for them.
package couchapi
