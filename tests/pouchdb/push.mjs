// A real PouchDB 9 client pushing a prepared database to a
// CouchDB-protocol server with LiveSync's settings (replicate.to,
// batch_size 25, batches_limit 25). The documents of --in (a JSON array,
// each with _id, _rev and _revisions) are first stored in a memory
// PouchDB with new_edits=false in file order, so its changes feed, and
// therefore the push, sends them in that order: a file with the metadata
// before the chunks makes PouchDB push the metadata first.
//
//   node push.mjs --url URL --db NAME --in FILE
//
// Credentials come from LIVESYNC_TEST_COUCHDB_USER and _PASSWORD.
// stdout: one JSON object {docs, ms, docsWritten}: ms from the start of
// the replication until it returned. Exit status 0 only if it completed
// with no error and no denied document.
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';

const require = createRequire(import.meta.url);
const PouchDB = require('pouchdb-node').plugin(require('pouchdb-adapter-memory'));

const die = (msg) => { process.stderr.write(`push.mjs: ${msg}\n`); process.exit(1); };
const args = {};
const argv = process.argv.slice(2);
for (let i = 0; i + 1 < argv.length; i += 2) args[argv[i].replace(/^--/, '')] = argv[i + 1];
if (!args.url || !args.db || !args.in) die('--url, --db and --in are required');
const user = process.env.LIVESYNC_TEST_COUCHDB_USER ?? '';
const password = process.env.LIVESYNC_TEST_COUCHDB_PASSWORD ?? '';

const docs = JSON.parse(readFileSync(args.in, 'utf8'));
const local = new PouchDB(`push-${randomBytes(6).toString('hex')}`, { adapter: 'memory' });
for (let i = 0; i < docs.length; i += 500) {
	const res = await local.bulkDocs(docs.slice(i, i + 500), { new_edits: false });
	for (const r of res) if (r.error) die(`local write ${r.id}: ${r.error}`);
}
const remote = new PouchDB(`${args.url.replace(/\/+$/, '')}/${encodeURIComponent(args.db)}`, {
	adapter: 'http',
	skip_setup: true,
	auth: user ? { username: user, password } : undefined,
});
let denied = 0;
const start = process.hrtime.bigint();
const result = await new Promise((resolve, reject) => {
	const rep = local.replicate.to(remote, { batch_size: 25, batches_limit: 25, retry: false, live: false });
	rep.on('denied', () => { denied++; });
	rep.on('complete', resolve);
	rep.on('error', reject);
}).catch((e) => die(`replication failed: ${e && (e.stack || e.message || e)}`));
const ms = Number(process.hrtime.bigint() - start) / 1e6;
if (denied || result.doc_write_failures) die(`denied ${denied}, write failures ${result.doc_write_failures}`);
process.stdout.write(JSON.stringify({ docs: docs.length, ms, docsWritten: result.docs_written }) + '\n');
