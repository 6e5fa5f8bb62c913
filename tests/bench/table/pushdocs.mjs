// PouchDB 9 pushing a vault's documents, as LiveSync pushes them
// (replicate.to with batch_size 25 / batches_limit 25): the reference of
// the benchmark table's push and import rows (tests/bench/table).
//
//   node pushdocs.mjs --from URL/DB|file:FILE --to URL/DB [--order chunks|metadata]
//        [--batch-size 25] [--batches-limit 25]
//
// Credentials: LIVESYNC_TEST_COUCHDB_USER / _PASSWORD for --from,
// PUSH_USER / PUSH_PASSWORD for --to (default: the same). The documents of
// --from (a database, or a JSON array of documents in FILE) are first read,
// untimed; they are then written, with their revisions, into a memory database
// in the order asked for — chunks ("h:…")
// before the notes' metadata, or the metadata first — so that its changes
// feed, which replicate.to follows, has that order. Only the push to --to
// is timed. Prints one JSON line: {docs, ms, docsPerSec, peakRssKiB}.
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, '../../pouchdb/package.json'));
const PouchDB = require('pouchdb-node').plugin(require('pouchdb-adapter-memory'));

function die(msg) {
	process.stderr.write(`pushdocs.mjs: ${msg}\n`);
	process.exit(1);
}
const args = { 'batch-size': '25', 'batches-limit': '25', order: 'chunks' };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i += 2) {
	if (!argv[i].startsWith('--') || i + 1 >= argv.length) die(`bad argument ${argv[i]}`);
	args[argv[i].slice(2)] = argv[i + 1];
}
if (!args.from || !args.to) die('--from and --to are required');
if (args.order !== 'chunks' && args.order !== 'metadata') die('--order: chunks or metadata');
const batchSize = Number(args['batch-size']), batchesLimit = Number(args['batches-limit']);
const env = process.env;
const auth = (u, p) => (u ? { username: u, password: p } : undefined);
const from = new PouchDB(args.from, { adapter: 'http', skip_setup: true,
	auth: auth(env.LIVESYNC_TEST_COUCHDB_USER, env.LIVESYNC_TEST_COUCHDB_PASSWORD) });
const to = new PouchDB(args.to, { adapter: 'http', skip_setup: true,
	auth: auth(env.PUSH_USER ?? env.LIVESYNC_TEST_COUCHDB_USER, env.PUSH_PASSWORD ?? env.LIVESYNC_TEST_COUCHDB_PASSWORD) });

const tag = randomBytes(6).toString('hex');
let docs;
if (args.from.startsWith('file:')) {
	// A JSON array of documents, as replicate.mjs --out writes it.
	docs = JSON.parse(readFileSync(args.from.slice(5), 'utf8'));
} else {
	const copy = new PouchDB(`copy-${tag}`, { adapter: 'memory' });
	await copy.replicate.from(from, { batch_size: 100, batches_limit: 10 });
	docs = (await copy.allDocs({ include_docs: true })).rows.map((r) => r.doc);
	await copy.destroy();
}
const isChunk = (d) => d._id.startsWith('h:');
const first = docs.filter((d) => isChunk(d) === (args.order === 'chunks'));
const rest = docs.filter((d) => isChunk(d) !== (args.order === 'chunks'));
const local = new PouchDB(`local-${tag}`, { adapter: 'memory' });
for (const part of [first, rest]) {
	for (let i = 0; i < part.length; i += 500) {
		await local.bulkDocs(part.slice(i, i + 500), { new_edits: false });
	}
}

function vmHWMKiB() {
	try {
		const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'));
		return m ? Number(m[1]) : 0;
	} catch { return 0; }
}
const start = process.hrtime.bigint();
let result;
try {
	result = await local.replicate.to(to, { batch_size: batchSize, batches_limit: batchesLimit, retry: false });
} catch (e) {
	die(`push failed: ${e && (e.stack || e.message || JSON.stringify(e))}`);
}
const ms = Number(process.hrtime.bigint() - start) / 1e6;
if (!result || result.ok === false || result.doc_write_failures > 0) die(`push incomplete: ${JSON.stringify(result)}`);
process.stdout.write(JSON.stringify({ docs: result.docs_written, ms, docsPerSec: result.docs_written / (ms / 1000),
	peakRssKiB: vmHWMKiB(), order: args.order, batchSize, batchesLimit, pouchdb: PouchDB.version }) + '\n');
await local.destroy();
