-- The tables of wasm/workers/d1kv (d1kv.Schema; a test keeps this file equal to it).
-- Apply with: npx wrangler d1 migrations apply livesync --remote
CREATE TABLE IF NOT EXISTS livesync_kv (db TEXT NOT NULL, b INTEGER NOT NULL, k BLOB NOT NULL, v BLOB NOT NULL, PRIMARY KEY (db, b, k)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS livesync_head (db TEXT NOT NULL PRIMARY KEY, version INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS livesync_databases (name TEXT NOT NULL PRIMARY KEY, created INTEGER NOT NULL) WITHOUT ROWID;
