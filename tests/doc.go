// Package tests holds the integration tests that run the adapters against
// real servers. They read the server from the environment:
//
//	LIVESYNC_TEST_COUCHDB_URL       e.g. http://127.0.0.1:5984
//	LIVESYNC_TEST_COUCHDB_USER      an admin (the tests create databases)
//	LIVESYNC_TEST_COUCHDB_PASSWORD
//
// .ci/run and scripts/test start the express-pouchdb test server
// (tests/couchserver) and set them; compose.yml starts Apache CouchDB 3.5
// for the same tests. Without a URL the tests skip, except when CI is
// set: then they fail, so a CI run never passes without them.
package tests
