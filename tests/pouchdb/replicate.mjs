// A real PouchDB 9 client: replicates one database of a CouchDB-protocol
// server into a local in-memory PouchDB with LiveSync's pull settings
// (replicate.from, batch_size 25, batches_limit 25, style all_docs;
// FORMAT.md §5.3 — chunks are pulled too, as with readChunksOnline off),
// fails loudly on any replication error, and writes the copy.
//
//   node replicate.mjs --url URL --db NAME [--user U] [--password P]
//        [--out FILE] [--batch-size 25] [--batches-limit 25] [--stats]
//
// --user and --password default to LIVESYNC_TEST_COUCHDB_USER and
// LIVESYNC_TEST_COUCHDB_PASSWORD (prefer the environment: argv is visible
// to other processes). Output (stdout, or FILE): a JSON array of every
// document of the copy (allDocs include_docs; no _local documents).
// With --stats the documents are not written; instead one JSON object
// {docs, ms, docsPerSec, peakRssKiB, ...} describes the pull (used by
// tests/bench/pull). Exit status 0 only if the replication completed with no
// error, no write failure and no denied document.
import { createRequire } from 'node:module';
import { readFileSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';

const require = createRequire(import.meta.url);
const PouchDB = require('pouchdb-node').plugin(require('pouchdb-adapter-memory'));

function die(msg) {
	process.stderr.write(`replicate.mjs: ${msg}\n`);
	process.exit(1);
}

const args = { 'batch-size': '25', 'batches-limit': '25' };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
	const a = argv[i];
	if (!a.startsWith('--')) die(`unexpected argument ${a}`);
	const k = a.slice(2);
	if (k === 'stats') { args.stats = true; continue; }
	if (i + 1 >= argv.length) die(`${a} needs a value`);
	args[k] = argv[++i];
}
const url = args.url, db = args.db;
const user = args.user ?? process.env.LIVESYNC_TEST_COUCHDB_USER ?? '';
const password = args.password ?? process.env.LIVESYNC_TEST_COUCHDB_PASSWORD ?? '';
if (!url || !db) die('--url and --db are required');
const batchSize = Number(args['batch-size']), batchesLimit = Number(args['batches-limit']);
if (!(batchSize > 0 && batchesLimit > 0)) die('--batch-size and --batches-limit must be positive');

// Peak resident set: the kernel's high-water mark, sampled RSS as a fallback.
let peakRss = 0;
const sample = () => { peakRss = Math.max(peakRss, process.memoryUsage().rss); };
function vmHWMKiB() {
	try {
		const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'));
		return m ? Number(m[1]) : 0;
	} catch { return 0; }
}

const remote = new PouchDB(`${url.replace(/\/+$/, '')}/${encodeURIComponent(db)}`, {
	adapter: 'http',
	skip_setup: true, // as LiveSync: never create the remote database
	auth: user ? { username: user, password } : undefined,
});
const local = new PouchDB(`copy-${randomBytes(6).toString('hex')}`, { adapter: 'memory' });

const timer = setInterval(sample, 50);
let denied = 0;
const errors = [];
const start = process.hrtime.bigint();
let result;
try {
	// As LiveSync's pullOnly one-shot (LiveSyncReplicator.ts): replicate.from
	// with batch_size / batches_limit; style all_docs is PouchDB's own.
	result = await new Promise((resolve, reject) => {
		const rep = local.replicate.from(remote, {
			batch_size: batchSize,
			batches_limit: batchesLimit,
			style: 'all_docs',
			retry: false,
			live: false,
		});
		rep.on('denied', (e) => { denied++; errors.push(e); });
		rep.on('error', reject);
		rep.on('complete', resolve);
	});
} catch (e) {
	clearInterval(timer);
	die(`replication failed: ${e && (e.stack || e.message || JSON.stringify(e))}`);
}
const ms = Number(process.hrtime.bigint() - start) / 1e6;
sample();
clearInterval(timer);

if (!result || result.ok === false || result.status !== 'complete' || result.doc_write_failures > 0 ||
	denied > 0 || (result.errors && result.errors.length > 0) || errors.length > 0) {
	die(`replication did not complete cleanly: ${JSON.stringify({ result, denied, errors: errors.map(String) })}`);
}

if (args.stats) {
	const info = await local.info();
	const out = {
		docs: result.docs_written, docCount: info.doc_count, ms,
		docsPerSec: result.docs_written / (ms / 1000),
		peakRssKiB: Math.max(vmHWMKiB(), Math.round(peakRss / 1024)),
		batchSize, batchesLimit, pouchdb: PouchDB.version,
	};
	process.stdout.write(JSON.stringify(out) + '\n');
} else {
	const all = await local.allDocs({ include_docs: true });
	const docs = all.rows.map((r) => r.doc);
	const json = JSON.stringify(docs);
	if (args.out) writeFileSync(args.out, json);
	else process.stdout.write(json + '\n');
	process.stderr.write(`replicate.mjs: PouchDB ${PouchDB.version} copied ${docs.length} documents (${result.docs_written} written) in ${ms.toFixed(0)} ms\n`);
}
await local.destroy();
