// Package tests holds the integration tests that run the adapters, the
// relay and the CLI against real servers. They read the servers from the
// environment:
//
//	LIVESYNC_TEST_COUCHDB_URL       e.g. http://127.0.0.1:5984
//	LIVESYNC_TEST_COUCHDB_USER      an admin (the tests create databases)
//	LIVESYNC_TEST_COUCHDB_PASSWORD
//
//	LIVESYNC_TEST_S3_ENDPOINT       host:port or http(s)://host:port
//	LIVESYNC_TEST_S3_ACCESS_KEY     a key allowed to create and delete buckets
//	LIVESYNC_TEST_S3_SECRET_KEY
//	LIVESYNC_TEST_S3_BUCKET_PREFIX  optional (default lsgo-test-)
//	LIVESYNC_TEST_S3_REGION, _VIRTUAL_DOMAIN, _SECURE, _CA_FILE  optional
//
// .ci/run and tests/run.sh start the express-pouchdb test server
// (tests/couchserver) and versitygw (tests/s3server) and set them;
// compose.yml starts Apache CouchDB 3.5 and MinIO for the same tests.
// Without a server the tests skip, except when CI is set: then they fail,
// so a CI run never passes without them.
package tests
