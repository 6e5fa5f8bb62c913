// PouchDB 9 pushing the documents of a vault as LiveSync pushes them
// (replicate.to, batch_size 25, batches_limit 25): the reference for
// `livesync import` in tests/bench/import/run.sh.
//
//   node pushdocs.mjs --in FILE --to URL/DB
//
// FILE is a CouchDB _all_docs?include_docs=true answer holding the
// documents a `livesync import` of the same folder wrote. They are
// written, untimed, into a memory database chunks ("h:…") first, so that
// the feed replicate.to follows has the chunks before the metadata, as
// the import sends them. Only the push to --to is timed. Credentials:
// TO_USER / TO_PASSWORD. Prints one JSON line: {docs, ms, docsPerSec,
// peakRssKiB}.
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, '../../pouchdb/package.json'));
const PouchDB = require('pouchdb-node').plugin(require('pouchdb-adapter-memory'));

const die = (msg) => { process.stderr.write(`pushdocs.mjs: ${msg}\n`); process.exit(1); };
const args = {};
const argv = process.argv.slice(2);
for (let i = 0; i + 1 < argv.length; i += 2) args[argv[i].replace(/^--/, '')] = argv[i + 1];
if (!args.in || !args.to) die('--in and --to are required');
const env = process.env;
const to = new PouchDB(args.to, { adapter: 'http', skip_setup: true,
	auth: env.TO_USER ? { username: env.TO_USER, password: env.TO_PASSWORD } : undefined });

const tag = randomBytes(6).toString('hex');
const docs = JSON.parse(readFileSync(args.in, 'utf8')).rows.map((r) => r.doc).filter((d) => d && !d._id.startsWith('_design/'));
const isChunk = (d) => d._id.startsWith('h:');
const local = new PouchDB(`local-${tag}`, { adapter: 'memory' });
for (const part of [docs.filter(isChunk), docs.filter((d) => !isChunk(d))]) {
	for (let i = 0; i < part.length; i += 500) await local.bulkDocs(part.slice(i, i + 500), { new_edits: false });
}

const start = process.hrtime.bigint();
let result;
try {
	result = await local.replicate.to(to, { batch_size: 25, batches_limit: 25, retry: false });
} catch (e) {
	die(`push failed: ${e && (e.stack || e.message || JSON.stringify(e))}`);
}
const ms = Number(process.hrtime.bigint() - start) / 1e6;
if (!result || result.ok === false || result.doc_write_failures > 0) die(`push incomplete: ${JSON.stringify(result)}`);
const hwm = /VmHWM:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'));
process.stdout.write(JSON.stringify({ docs: result.docs_written, ms, docsPerSec: result.docs_written / (ms / 1000),
	peakRssKiB: hwm ? Number(hwm[1]) : 0 }) + '\n');
await local.destroy();
