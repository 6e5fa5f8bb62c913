// Many real PouchDB 9 clients pulling one database at once, each
// configured as LiveSync configures it (see livesync-client.mjs): a
// one-shot pull-only catch-up with the readChunksOnline selector (batch
// size 25, batch limit 25), then LiveSync's continuous mode (live sync,
// heartbeat 30000, push and the selector pull). Chunks are fetched as the
// plugin fetches them: POST _all_docs keys, 100 ids a request, stored with
// new_edits=false. Used by tests/relay_load_test.go.
//
//   node livesync-load.mjs --url URL --db NAME --out FILE --clients N [--first K] [--watch-prefix P]
//
// The clients are numbered from K (default 0), so that several processes
// can share the work.
//
// Credentials come from LIVESYNC_TEST_COUCHDB_USER and _PASSWORD.
//
// Each client checks, right after each pulled batch, that every chunk its
// metadata documents name is either already in its database or on the
// server: a metadata document served while the server lacks one of its
// chunks is a violation (the relay must hold such a document back). It
// also records when it first saw each document whose id starts with P
// (Date.now(), milliseconds), so that the test can compare with when the
// chunks were sent.
//
// stdout, one line each:
//   CAUGHTUP <client> <ms> <docs> a client finished its catch-up pull and
//                                 fetched every chunk it names: <ms> after
//                                 the start, <docs> documents stored
//   DONE                          after stdin says FINISH: every client
//                                 stopped its live sync and ran a last
//                                 catch-up; the results are in FILE (JSON:
//                                 per client its document count, the
//                                 sha256 of its sorted "id rev" lines,
//                                 violations and first-seen times; every
//                                 request's latency, by kind); FILE.client-<i> has
//                                 client i's sorted "id rev" lines
// Exit status 0 unless a replication failed.
import { createRequire } from 'node:module';
import { writeFileSync } from 'node:fs';
import { createHash, randomBytes } from 'node:crypto';
import { createInterface } from 'node:readline';
import { performance } from 'node:perf_hooks';

const require = createRequire(import.meta.url);
const PouchDB = require('pouchdb-node').plugin(require('pouchdb-adapter-memory'));

const die = (msg) => { process.stderr.write('livesync-load: ' + msg + '\n'); process.exit(1); };
const args = { clients: '20', first: '0', 'watch-prefix': '\u0000' };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i += 2) args[argv[i].replace(/^--/, '')] = argv[i + 1];
if (!args.url || !args.db || !args.out) die('--url, --db and --out are required');
const auth = { username: process.env.LIVESYNC_TEST_COUCHDB_USER, password: process.env.LIVESYNC_TEST_COUCHDB_PASSWORD };
const selector = { type: { $ne: 'leaf' } };
const opts = { batch_size: 25, batches_limit: 25, style: 'all_docs' };
const prefix = args['watch-prefix'];

// Request latencies (ms, until the body is read) by kind ("_bulk_get
// POST"), longpolls left out: they wait for changes on purpose.
const byKind = {};
function timedFetch(url, o) {
	const t0 = performance.now();
	const path = new URL(url).pathname;
	const kind = (path.includes('/_local/') ? '_local' : (path.split('/').pop() || '{db}')) + ' ' + (o.method || 'GET');
	const longpoll = /[?&]feed=longpoll/.test(url);
	return PouchDB.fetch(url, o).then((res) => {
		let done = false;
		const record = () => {
			if (done || longpoll) return;
			done = true;
			const ms = performance.now() - t0;
			(byKind[kind] ??= []).push(ms);
		};
		for (const m of ['json', 'text']) {
			const orig = res[m].bind(res);
			res[m] = async () => { try { return await orig(); } finally { record(); } };
		}
		return res;
	});
}

const run = (rep) => new Promise((resolve, reject) => {
	rep.on('denied', (e) => reject(new Error('denied: ' + JSON.stringify(e))));
	rep.on('error', reject);
	rep.on('complete', (res) => (res.ok === false || res.doc_write_failures > 0) ? reject(new Error(JSON.stringify(res))) : resolve(res));
});

const isMeta = (d) => d.type !== 'leaf' && Array.isArray(d.children) && d.children.length > 0 && !d._deleted;

class Client {
	constructor(i) {
		this.i = i;
		this.local = new PouchDB('load-' + i + '-' + randomBytes(4).toString('hex'), { adapter: 'memory' });
		this.remote = new PouchDB(args.url.replace(/\/+$/, '') + '/' + encodeURIComponent(args.db),
			{ adapter: 'http', skip_setup: true, auth, fetch: timedFetch });
		this.chain = Promise.resolve();
		this.seen = {};
		this.violations = [];
		this.fetched = 0;
		this.fetchRequests = 0;
		this.error = null;
		// Every document the client stores passes through onDoc, whichever
		// replication (or fetch) wrote it: a replication that is cancelled
		// may still write its last batch without a change event.
		this.lastSeq = 0;
		this.waiters = [];
		this.stored = new Set(); // ids of the documents stored that are not chunks
		this.checked = new Set(); // "id rev" of the metadata checked
		this.feed = this.local.changes({ live: true, since: 0 })
			.on('change', (c) => this.onDoc(c.id, c.seq))
			.on('error', (e) => die(`client ${this.i}: local changes: ${e && (e.stack || e.message)}`));
	}

	// onDoc records a watched document when it is first stored, and the
	// documents that may be metadata (for settle).
	onDoc(id, seq) {
		if (id.startsWith(prefix) && !(id in this.seen)) this.seen[id] = Date.now();
		if (!id.startsWith('h:')) this.stored.add(id);
		this.lastSeq = seq;
		this.waiters = this.waiters.filter((w) => seq >= w.seq ? (w.resolve(), false) : true);
	}

	// onBatch runs after each pulled batch: it queues the check and fetch
	// of the chunks its metadata documents name, as the plugin fetches
	// them (readChunksOnline).
	onBatch(docs) {
		this.check(docs.filter(isMeta));
	}

	check(metas) {
		metas = metas.filter((m) => !this.checked.has(m._id + ' ' + m._rev));
		if (metas.length === 0) return;
		for (const m of metas) this.checked.add(m._id + ' ' + m._rev);
		this.chain = this.chain.then(() => this.ensureChunks(metas)).catch((e) => { this.error ??= e; });
	}

	// settle waits until every stored document went through onDoc, checks
	// the metadata no batch event announced, and waits for every check.
	async settle() {
		const seq = (await this.local.info()).update_seq;
		if (this.lastSeq < seq) await new Promise((resolve) => this.waiters.push({ seq, resolve }));
		const all = await this.local.allDocs({ keys: [...this.stored], include_docs: true });
		this.check(all.rows.filter((r) => r.doc && !this.checked.has(r.id + ' ' + r.value.rev)).map((r) => r.doc).filter(isMeta));
		await this.chain;
		if (this.error) throw this.error;
	}

	// ensureChunks fetches the chunks of metas the client lacks, right
	// after the batch that brought them; one the server lacks too is a
	// violation: the relay served metadata before it had its chunks.
	async ensureChunks(metas) {
		const need = new Set();
		for (const m of metas) for (const c of m.children) need.add(c);
		const ids = [...need];
		const have = await this.local.allDocs({ keys: ids });
		const want = have.rows.filter((r) => r.error || !r.value || r.value.deleted).map((r) => r.key);
		const missing = new Set();
		for (let i = 0; i < want.length; i += 100) {
			const res = await this.remote.allDocs({ keys: want.slice(i, i + 100), include_docs: true });
			this.fetchRequests++;
			const docs = [];
			for (const r of res.rows) {
				if (r.error || !r.doc) missing.add(r.key);
				else docs.push(r.doc);
			}
			this.fetched += docs.length;
			const out = await this.local.bulkDocs(docs, { new_edits: false });
			if (out.some((r) => r.error)) throw new Error('storing chunks: ' + JSON.stringify(out.filter((r) => r.error)));
		}
		for (const m of metas) {
			const lacking = m.children.filter((c) => missing.has(c));
			if (lacking.length > 0) this.violations.push({ id: m._id, rev: m._rev, missing: lacking, at: Date.now() });
		}
	}

	async catchUp() {
		const rep = this.local.replicate.from(this.remote, { ...opts, selector, retry: false });
		rep.on('change', (info) => this.onBatch(info.docs));
		await run(rep);
		await this.settle();
	}

	startLive() {
		this.live = this.local.sync(this.remote, { live: true, retry: false, heartbeat: 30000, batch_size: 25, batches_limit: 25, push: {}, pull: { selector } });
		this.live.on('change', (info) => { if (info.direction === 'pull') this.onBatch(info.change.docs); });
		this.live.on('error', (e) => die(`client ${this.i}: live sync: ${e && (e.stack || e.message || JSON.stringify(e))}`));
		this.live.on('denied', (e) => die(`client ${this.i}: denied: ${JSON.stringify(e)}`));
	}

	async finish() {
		if (this.live) {
			const stopped = new Promise((resolve) => this.live.on('complete', resolve));
			this.live.cancel();
			await stopped;
		}
		await this.catchUp();
		this.feed.cancel();
		// Every metadata document's chunks are here at the end.
		const all = await this.local.allDocs({ include_docs: true });
		const ids = new Set(all.rows.map((r) => r.id));
		let incomplete = 0;
		for (const r of all.rows) {
			const d = r.doc;
			if (d.type !== 'leaf' && Array.isArray(d.children) && d.children.some((c) => !ids.has(c))) incomplete++;
		}
		const lines = all.rows.map((r) => r.id + ' ' + r.value.rev).sort();
		writeFileSync(args.out + '.client-' + this.i, lines.join('\n'));
		return {
			client: this.i, docs: lines.length, incomplete,
			sha256: createHash('sha256').update(lines.join('\n')).digest('hex'),
			fetched: this.fetched, fetchRequests: this.fetchRequests,
			violations: this.violations, seen: this.seen,
		};
	}
}

try {
	const n = Number(args.clients);
	const clients = Array.from({ length: n }, (_, i) => new Client(Number(args.first) + i));
	const t0 = performance.now();
	const caughtUp = clients.map(async (c) => {
		await c.catchUp();
		const ms = Math.round(performance.now() - t0);
		process.stdout.write(`CAUGHTUP ${c.i} ${ms} ${(await c.local.info()).doc_count}\n`);
		c.startLive();
	});
	const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
	let finish = false;
	for await (const line of rl) if (line.trim() === 'FINISH') { finish = true; break; }
	if (!finish) die('stdin ended without FINISH');
	await Promise.all(caughtUp);
	const results = await Promise.all(clients.map((c) => c.finish()));
	writeFileSync(args.out, JSON.stringify({ clients: results, latencies: byKind }));
	process.stdout.write('DONE\n', () => process.exit(0));
} catch (e) {
	die(e && (e.stack || e.message || JSON.stringify(e)));
}
