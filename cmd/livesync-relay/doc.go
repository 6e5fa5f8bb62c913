// Command livesync-relay is a LiveSync-compatible CouchDB-protocol
// server: the Obsidian Self-hosted LiveSync plugin (and PouchDB, and the
// livesync CLI) use it as their CouchDB remote. Its data is a folder of
// bbolt files; it needs no CouchDB. A database may instead be kept on a
// CouchDB server ([databases.store] kind = "couchdb"), which several
// relays then serve together (see "Several relays" below).
//
//	go run ./cmd/livesync-relay                      # 127.0.0.1:5984, ./livesync-data
//	livesync-relay --config /etc/livesync-relay/relay.toml
//
// # First start
//
// Without configuration the relay listens on 127.0.0.1:5984, creates
// ./livesync-data (mode 0700) with one database, "vault", and one admin
// account, then prints on stderr how to point the plugin at it. The
// admin's password comes from $LIVESYNC_RELAY_ADMIN_PASSWORD (or the file
// named by $LIVESYNC_RELAY_ADMIN_PASSWORD_FILE; the name from
// $LIVESYNC_RELAY_ADMIN_USER, default "admin"), and is then never stored.
// Without it, the first start generates a strong password, stores only its
// PBKDF2-SHA256 hash in users.json (mode 0600) and prints the password
// once; later starts say it was printed, and --reset-admin-password
// generates and prints a new one. A taken port is a clear error (exit 1)
// before anything is written.
//
// # Configuration
//
// A TOML file (--config FILE or $LIVESYNC_RELAY_CONFIG) sets the listen
// address, TLS, the data folder, CORS origins, users, databases (with an
// optional vault passphrase each), request and document size limits,
// whether /metrics and /status are public, the purgatory's timings,
// each database's upstreams and the hunt's per-source limits.
// relay.example.toml documents every key; secrets come from files or
// environment variables, never from the file itself, and are never
// logged.
//
// # Several relays
//
// A database with a CouchDB store is that CouchDB database: documents,
// revisions and the changes feed are CouchDB's, and the hold-back's held
// notes, the purgatory and the hunt's lease are _local documents in it,
// which CouchDB never lists or replicates. Every relay in front of it
// follows its changes feed (a note held by one relay is released by the
// one that sees its chunks) and reads the others' holds every refresh;
// one relay at a time holds the lease (lease_ttl, renewed every third of
// it) and alone runs the database's upstreams and the hunt, continuing
// the last leader's hunt state, so per-source limits are global. When
// every database is kept on CouchDB the relay opens no data folder: its
// admin comes from [[users]] or the environment, its uuid is the CouchDB
// server's, only the configured databases exist, and the filesystem may
// be read-only. CouchDB out of reach means 503 answers while serving,
// and a logged wait (1 s doubling to 30 s) at start; wrong credentials
// stop the start at once. --check-config checks a configuration and its
// secrets without listening or connecting.
//
// # Upstreams
//
// A database may list upstreams ([[databases.upstreams]]): CouchDB
// databases (or other relays) and LiveSync journal buckets on S3, each
// with its own credentials. The relay replicates with each continuously
// (mode sync, pull or push: a finite catch-up, then live; reconnecting
// with backoff; a bucket is listed every poll interval and sent to at
// once when the database changes), so a note written through any of them
// reaches all. Pulled metadata goes through the hold-back as pulled from
// that upstream (first hunt after 500 ms). Every upstream (also those of
// mode "source", which only serve chunks) is a chunk source of the
// database's purgatory hunt (engine/hunt), one throttle per host:port or
// bucket, so a held note is released once its chunks were found on any
// of them.
//
// The relay stores the remote form (encrypted chunks, obfuscated
// metadata) exactly as clients send it, and keeps it so at every
// boundary: a CouchDB upstream with the database's salt gets and gives
// documents unchanged (a side without a salt takes the other's); one with
// another salt is re-encrypted, which needs the vault passphrase; a
// bucket's packs hold the plaintext form, so the journal runs over a
// view that encodes and decodes with the vault's codec, which needs the
// passphrase too (or e2ee = false for an unencrypted vault). The package
// doc of engine/bridge says how, in detail.
//
// # Peer to peer
//
// A database may join sync groups ([[databases.p2p]]): the relay is then
// an always-on peer of the group (adapters/p2p), serving the database in
// the remote form it stores (no vault passphrase needed) to the peers
// approved in the group's peer book, over libp2p (TCP and QUIC; [p2p]
// listen, default port 4001). Peers push to it and pull from it; their
// pushes go through the hold-back like a CouchDB client's; the relay
// starts no sync itself. One host, one peer id (p2p-identity.key in the
// data folder), serves every group: a stream goes to the group that
// approved its peer, so a peer is approved in one group. The relay
// announces itself in each group's room on the group's Nostr relays
// ("self" is its own /_nostr, on the HTTP listener: an in-process relay
// that accepts only the discovery announcements, within [nostr] limits)
// and, with circuit_relay (default true), lets peers behind NAT keep a
// slot on it. Configured approvals are merged into the group's book
// (data folder p2p/<db>/<group>/p2p-peers.json) at start; peers that
// knocked unapproved are listed pending in /status.
//
// A database may also join rooms of the plugin's own P2P mode
// ([[databases.livesync_p2p]], lsp2p.go): the relay is an always-on
// LiveSync device of the room (adapters/p2p/livesyncp2p: Trystero over
// WebRTC, signalled by default on its own /_nostr, which then forwards
// Trystero's ephemeral events). Documents cross in the plugin's
// plaintext form, so the relay serves the database through the vault's
// codec (an encrypted vault needs the database's passphrase); it serves
// the devices auto_accept names, pulls from a device that syncs with it
// or announces changes, tells the devices about its changes (broadcast),
// holds their writes back like a CouchDB client's (user
// "livesync-p2p:GROUP") and asks them for held notes' chunks.
//
// # What is served
//
// Everything CouchDB-shaped is couchapi's (package
// adapters/couchdb/couchapi). Each database is served through
// engine/holdback: a metadata revision whose chunks have not arrived is
// held (not in _changes, _all_docs or GETs) and released, at a new
// sequence, when they arrive; with the vault passphrase configured,
// obfuscated metadata is decrypted in memory to decide (once the first
// client has written the vault's salt, the hold-back is rebuilt with the
// vault's codec). Besides the CouchDB API:
//
//	GET /healthz   200 {"status":"ok"}; 503 while shutting down. Open.
//	GET /metrics   Prometheus text format. Admin credentials unless metrics_public.
//	GET /status    JSON: databases, hold-back mode, held documents and why, upstreams
//	               (state, lag_push, lag_pull, lag, resets, last error) and the hunt's counters per source,
//	               P2P groups (peer id, addresses, peers with their counters, pending peers),
//	               LiveSync P2P rooms (state, devices present, pulls and documents counted). Same access.
//	/_nostr        the discovery relay (websocket; NIP-11 for Accept: application/nostr+json). Open.
//	PUT|POST|DELETE /_p2p/{db}/{group}/peers/{id}
//	               approve (optional body {"device":"name"}) or revoke a peer at run time;
//	               GET /_p2p/{db}/{group} shows the group. Admins only, whatever metrics_public says.
//
// Metrics (all prefixed livesync_relay_): http_requests_total{route,code}
// and http_request_duration_seconds{route} (route is the pattern, e.g.
// /{db}/_changes), replication_clients{feed} (open longpoll, continuous
// and eventsource feeds), held_documents{db,state}, held_revisions{db},
// holdback_revisions_total{db,outcome}, holdback_save_errors_total{db},
// purgatory_events_total{db,event}, purgatory_remembered_revisions{db},
// holdback_mode{db,mode}, store_size_bytes{db}; for databases with
// upstreams upstream_up{db,upstream}, upstream_state{db,upstream,state},
// upstream_lag{db,upstream} (lag_push + lag_pull),
// upstream_lag_documents{db,upstream,direction},
// upstream_resets_total{db,upstream}, upstream_errors_total{db,upstream},
// upstream_documents_total{db,upstream,direction},
// hunt_requests_total{db,source,outcome}, hunt_chunks_total{db,source},
// hunt_in_flight, hunt_in_window, hunt_queued_documents,
// hunt_max_in_flight and hunt_max_in_window{db,source},
// hunt_limit{db,limit}, hunt_documents{db,state},
// hunt_documents_total{db,outcome}, hunt_hedges_total{db}; for P2P
// groups p2p_peers_connected, p2p_peers_approved and
// p2p_pending_peers{db,group}, p2p_bytes_total, p2p_documents_total and
// p2p_chunks_total{db,group,peer,direction},
// p2p_hunt_requests_total{db,group,peer}; for LiveSync P2P rooms
// livesync_p2p_joined, livesync_p2p_peers{db,group,accepted},
// livesync_p2p_pulls_total{db,group,kind},
// livesync_p2p_documents_total{db,group,direction},
// livesync_p2p_join_errors_total and livesync_p2p_hunt_sources{db,group};
// with /_nostr
// nostr_connections, nostr_events_stored, nostr_events_total{outcome}
// and nostr_connections_closed_total{reason}; plus the Go runtime and
// process collectors.
//
// # Shutdown
//
// SIGINT or SIGTERM ends every changes feed, lets running requests finish
// (shutdown_timeout, default 30 s), saves every database's held documents
// and purgatory timers, and closes the files; the next start resumes them
// with the downtime subtracted. A second signal exits at once.
//
// Exit codes: 0 after a clean shutdown, 1 when the relay could not start
// or stopped with an error, 2 for a wrong command line or configuration.
package main
