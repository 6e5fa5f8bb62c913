// Several real PouchDB 9 clients in one process for the soak test, each
// configured as the LiveSync plugin configures it (batch_size 25,
// batches_limit 25, the readChunksOnline selector {"type":{"$ne":"leaf"}}
// on the pull side, chunks fetched with POST _all_docs keys in groups of
// 100), in LiveSync's continuous mode: live sync with retry, so that the
// faults the test injects (latency, resets) are ridden out as the plugin
// rides them out.
//
//   node soak-client.mjs --url URL --db NAME --clients N --out DIR
//
// Credentials come from LIVESYNC_TEST_COUCHDB_USER and _PASSWORD. The
// documents are in the remote form (the Go test encodes them).
//
// stdin, one JSON command a line; stdout, one JSON answer a line
// ({"ok":true,…} or {"ok":false,"error":…}):
//   {"op":"load","client":i,"docs":[…]}  bulkDocs new_edits=false into
//                                        client i (a writer's edit); its
//                                        live sync pushes it
//   {"op":"stats"}                       per client: pulled, fetched,
//                                        errors (replication errors
//                                        ridden out), pending chunks
//   {"op":"stop"}                        every live sync cancelled, then
//                                        a one-shot push of each client
//                                        (retried until it succeeds)
//   {"op":"report"}                      a one-shot pull and chunk fetch
//                                        for each client (retried), then
//                                        DIR/client-i.txt holds its sorted
//                                        "id rev" lines of every document
//                                        that is not a chunk; answers per
//                                        client the count, incomplete
//                                        (metadata lacking a chunk),
//                                        violations (metadata served while
//                                        the server lacked its chunks)
import { createRequire } from 'node:module';
import { writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { createInterface } from 'node:readline';

const require = createRequire(new URL('../pouchdb/package.json', import.meta.url));
const PouchDB = require('pouchdb-node').plugin(require('pouchdb-adapter-memory'));

const die = (msg) => { process.stderr.write('soak-client: ' + msg + '\n'); process.exit(1); };
const args = { clients: '1' };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i += 2) args[argv[i].replace(/^--/, '')] = argv[i + 1];
if (!args.url || !args.db || !args.out) die('--url, --db and --out are required');
const auth = { username: process.env.LIVESYNC_TEST_COUCHDB_USER, password: process.env.LIVESYNC_TEST_COUCHDB_PASSWORD };
const selector = { type: { $ne: 'leaf' } };
const opts = { batch_size: 25, batches_limit: 25, style: 'all_docs' };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const errText = (e) => String(e && (e.message || e.reason || e.name || JSON.stringify(e)));

// Requests other than feeds give up after 60 s: a connection the proxy
// black-holes must not hang a one-shot replication forever.
// Requests that failed (no answer) and answers of 500 or more are
// counted: PouchDB's live sync retries them without an event.
const wire = { requests: 0, failed: 0, server_errors: 0 };
function timedFetch(url, o = {}) {
	wire.requests++;
	let signal = o.signal;
	if (!/[?&]feed=(longpoll|continuous)/.test(String(url))) {
		signal = o.signal ? AbortSignal.any([o.signal, AbortSignal.timeout(60000)]) : AbortSignal.timeout(60000);
	}
	return PouchDB.fetch(url, { ...o, signal }).then(
		(res) => { if (res.status >= 500) wire.server_errors++; return res; },
		(e) => { wire.failed++; throw e; });
}

const run = (rep) => new Promise((resolve, reject) => {
	rep.on('denied', (e) => reject(new Error('denied: ' + JSON.stringify(e))));
	rep.on('error', reject);
	rep.on('complete', (res) => (res.ok === false || res.doc_write_failures > 0) ? reject(new Error(JSON.stringify(res))) : resolve(res));
});

const isMeta = (d) => d && d.type !== 'leaf' && Array.isArray(d.children) && d.children.length > 0;

class Client {
	constructor(i) {
		this.i = i;
		this.local = new PouchDB('soak-' + i + '-' + randomBytes(4).toString('hex'), { adapter: 'memory' });
		this.remote = new PouchDB(args.url.replace(/\/+$/, '') + '/' + encodeURIComponent(args.db),
			{ adapter: 'http', skip_setup: true, auth, fetch: timedFetch });
		this.pending = new Set(); // chunk ids some pulled metadata names, not fetched yet
		this.missing = new Set(); // chunk ids the server answered it lacked
		this.pulled = 0;
		this.fetched = 0;
		this.errors = 0;
		this.lastError = '';
		this.violations = 0;
		this.stopped = false;
		this.fetching = null;
	}

	note(e) { this.errors++; this.lastError = errText(e); }

	onPulled(docs) {
		this.pulled += docs.length;
		for (const d of docs) if (isMeta(d) && !d.deleted) for (const c of d.children) this.pending.add(c);
		this.kick();
	}

	// kick runs one fetch pass at a time; a failed pass leaves the ids
	// pending for the next.
	kick() {
		if (this.fetching) return;
		this.fetching = this.fetchPending().catch((e) => this.note(e)).finally(() => { this.fetching = null; });
	}

	async fetchPending() {
		while (this.pending.size > 0) {
			const ids = [...this.pending].slice(0, 100);
			const have = await this.local.allDocs({ keys: ids });
			const want = [];
			for (const r of have.rows) {
				if (r.error || !r.value || r.value.deleted) want.push(r.key);
				else this.pending.delete(r.key);
			}
			if (want.length === 0) continue;
			const res = await this.remote.allDocs({ keys: want, include_docs: true });
			const docs = [];
			for (const r of res.rows) {
				if (r.error || !r.doc) {
					if (!this.missing.has(r.key)) { this.missing.add(r.key); this.violations++; }
					this.pending.delete(r.key);
				} else docs.push(r.doc);
			}
			if (docs.length > 0) {
				const out = await this.local.bulkDocs(docs, { new_edits: false });
				if (out.some((r) => r.error)) throw new Error('storing chunks: ' + JSON.stringify(out.filter((r) => r.error)));
				this.fetched += docs.length;
				for (const d of docs) { this.pending.delete(d._id); this.missing.delete(d._id); }
			}
		}
	}

	startLive() {
		if (this.stopped) return;
		const live = this.local.sync(this.remote, {
			live: true, retry: true, heartbeat: 30000, batch_size: 25, batches_limit: 25, push: {}, pull: { selector },
			back_off_function: (d) => (d === 0 ? 500 : Math.min(d * 2, 5000)),
		});
		this.live = live;
		live.on('change', (info) => { if (info.direction === 'pull') this.onPulled(info.change.docs); });
		live.on('paused', (err) => { if (err) this.note(err); });
		live.on('denied', (e) => this.note(new Error('denied: ' + JSON.stringify(e))));
		live.on('error', (e) => {
			// retry: true gives up only on errors it deems fatal; the
			// plugin starts again, and so does the client, a bit later.
			this.note(e);
			setTimeout(() => this.startLive(), 2000);
		});
		this.liveDone = new Promise((resolve) => live.on('complete', resolve).on('error', resolve));
	}

	async stop() {
		this.stopped = true;
		if (this.live) { this.live.cancel(); await Promise.race([this.liveDone, sleep(10000)]); }
		await this.retry(() => run(this.local.replicate.to(this.remote, { ...opts, retry: false })));
	}

	async retry(fn) {
		let last;
		for (let attempt = 0; attempt < 20; attempt++) {
			try { return await fn(); } catch (e) { last = e; this.note(e); await sleep(1000); }
		}
		throw new Error(`client ${this.i}: gave up after 20 attempts: ${errText(last)}`);
	}

	async report() {
		await this.retry(async () => {
			const rep = this.local.replicate.from(this.remote, { ...opts, selector, retry: false });
			rep.on('change', (info) => this.onPulled(info.docs));
			await run(rep);
		});
		// Every metadata document's chunks, whichever batch brought it.
		const all = await this.local.allDocs({ include_docs: true });
		for (const r of all.rows) if (isMeta(r.doc) && !r.doc.deleted) for (const c of r.doc.children) this.pending.add(c);
		if (this.fetching) await this.fetching;
		await this.retry(() => this.fetchPending());
		const after = await this.local.allDocs({ include_docs: true });
		const ids = new Set(after.rows.map((r) => r.id));
		let incomplete = 0;
		const lines = [];
		for (const r of after.rows) {
			if (r.id.startsWith('h:')) continue;
			lines.push(r.id + ' ' + r.value.rev);
			if (isMeta(r.doc) && !r.doc.deleted && r.doc.children.some((c) => !ids.has(c))) incomplete++;
		}
		lines.sort();
		writeFileSync(`${args.out}/client-${this.i}.txt`, lines.join('\n'));
		return { client: this.i, docs: lines.length, incomplete, violations: this.violations, errors: this.errors, last_error: this.lastError };
	}

	stats() {
		return { client: this.i, pulled: this.pulled, fetched: this.fetched, errors: this.errors, pending: this.pending.size, last_error: this.lastError };
	}
}

// PouchDB's http adapter leaves some failed requests (the remote's info
// during a reset) without a handler; in the plugin's Electron page such a
// rejection is logged and the app goes on, and so does this process.
let unhandled = 0;
process.on('unhandledRejection', () => { unhandled++; });

const clients = Array.from({ length: Number(args.clients) }, (_, i) => new Client(i));
clients.forEach((c) => c.startLive());

const ops = {
	async load(c) {
		const cl = clients[c.client];
		if (!cl) throw new Error('no client ' + c.client);
		const out = await cl.local.bulkDocs(c.docs, { new_edits: false });
		if (out.some((r) => r.error)) throw new Error('load: ' + JSON.stringify(out.filter((r) => r.error)));
		return {};
	},
	async stats() { return { unhandled, wire, clients: clients.map((c) => c.stats()) }; },
	async stop() { await Promise.all(clients.map((c) => c.stop())); return {}; },
	async report() { return { unhandled, wire, clients: await Promise.all(clients.map((c) => c.report())) }; },
};

const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of rl) {
	if (!line.trim()) continue;
	let answer;
	try {
		const c = JSON.parse(line);
		const op = ops[c.op];
		if (!op) throw new Error('unknown op ' + c.op);
		answer = { ok: true, ...(await op(c)) };
	} catch (e) {
		answer = { ok: false, error: String(e && (e.stack || e.message || JSON.stringify(e))) };
	}
	process.stdout.write(JSON.stringify(answer) + '\n');
}
await Promise.all(clients.map((c) => c.local.destroy().catch(() => {})));
process.exit(0);
