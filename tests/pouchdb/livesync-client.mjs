// A real PouchDB 9 client doing what the LiveSync plugin does against a
// CouchDB remote (FORMAT.md §5.2, §5.3, §5.6): batch_size 25,
// batches_limit 25, style all_docs, the readChunksOnline selector
// {"type":{"$ne":"leaf"}} on the pull side, and chunks fetched with
// allDocs({keys, include_docs}) — POST _all_docs — in groups of 100, error
// rows and rows without doc dropped, stored with new_edits=false.
//
// The documents are in the remote form (E2EE chunks, obfuscated metadata):
// the plugin's transform runs on its side of the wire, the Go tests encode
// and decode with the engine's codec. Credentials come from the
// environment (LIVESYNC_TEST_COUCHDB_USER, _PASSWORD), never argv.
//
//   node livesync-client.mjs --url URL --mode MODE --db NAME [...]
//
// Modes:
//
//   roundtrip --db2 NAME --chunks FILE
//     replicate.from the remote with the selector, fetch the chunks named in
//     FILE (a JSON array of ids), then replicate.to a second database; prints
//     {pulled, fetched, requests, pushed, local}.
//   sync --wait-for ID
//     local.sync(remote, {live: true, retry: false, heartbeat: 30000, pull:
//     {selector}}) as LiveSync's continuous mode; prints READY when caught
//     up, writes a local document "from-pouch", prints GOT <id> <rev> when
//     ID arrives, and on stdin's end prints LOCAL [ids…] and exits.
//   device
//     one LiveSync device with an in-memory database that lives as long as
//     the process: reads one JSON command a line on stdin and answers one
//     JSON line on stdout ({"ok":true,…} or {"ok":false,"error":…}):
//       {"op":"load","docs":[…]}  bulkDocs new_edits=false (a filled vault)
//       {"op":"put","docs":[…]}   bulkDocs (edits: PouchDB chooses the revs)
//       {"op":"sync"}             one-shot local.sync(remote) as the plugin's
//                                 "sync" command; answers the push and pull
//                                 counts and the pulled [id, rev] pairs
//       {"op":"fetch","ids":[…]}  the chunk fetch; answers fetched, missing
//       {"op":"docs"}             every document (winning revisions)
//       {"op":"handshake","node":N} the plugin's pre-sync reads for node N:
//                                 answers salt, locked, accepted_nodes and
//                                 the lock verdict (OK, LOCKED, NODE_LOCKED,
//                                 NODE_CLEANED)
//     It exits 0 on stdin's end.
//
// Any replication error, write failure or denied document fails loudly.
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { createInterface } from 'node:readline';

const require = createRequire(import.meta.url);
const PouchDB = require('pouchdb-node').plugin(require('pouchdb-adapter-memory'));

const die = (msg) => { process.stderr.write('livesync-client: ' + msg + '\n'); process.exit(1); };
const args = {};
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i += 2) args[argv[i].replace(/^--/, '')] = argv[i + 1];
if (!args.url || !args.db || !args.mode) die('--url, --db and --mode are required');
const auth = { username: process.env.LIVESYNC_TEST_COUCHDB_USER, password: process.env.LIVESYNC_TEST_COUCHDB_PASSWORD };
const remoteOf = (db) => new PouchDB(args.url.replace(/\/+$/, '') + '/' + encodeURIComponent(db), { adapter: 'http', skip_setup: true, auth });
// LiveSync's options (FORMAT.md §5.2 step 5).
const selector = { type: { $ne: 'leaf' } };
const opts = { batch_size: 25, batches_limit: 25, style: 'all_docs' };
const local = new PouchDB('copy-' + randomBytes(6).toString('hex'), { adapter: 'memory' });

const run = (rep) => new Promise((resolve, reject) => {
	rep.on('denied', (e) => reject(new Error('denied: ' + JSON.stringify(e))));
	rep.on('error', reject);
	rep.on('complete', (res) => {
		const failed = (r) => r && (r.ok === false || r.doc_write_failures > 0);
		if (failed(res) || failed(res.push) || failed(res.pull)) reject(new Error(JSON.stringify(res)));
		else resolve(res);
	});
});

// fetchChunks is the plugin's ChunkFetcher: POST _all_docs keys, 100 ids a
// request, error rows and rows without doc dropped, stored new_edits=false.
async function fetchChunks(remote, ids) {
	let fetched = 0, requests = 0;
	const missing = [];
	for (let i = 0; i < ids.length; i += 100) {
		const res = await remote.allDocs({ keys: ids.slice(i, i + 100), include_docs: true });
		requests++;
		const docs = [];
		for (const r of res.rows) {
			if (r.error || !r.doc) missing.push(r.key);
			else docs.push(r.doc);
		}
		fetched += docs.length;
		const out = await local.bulkDocs(docs, { new_edits: false });
		if (out.some((r) => r.error)) throw new Error('storing chunks: ' + JSON.stringify(out.filter((r) => r.error)));
	}
	return { fetched, requests, missing };
}

const counts = (r) => r ? { docs_read: r.docs_read, docs_written: r.docs_written, last_seq: r.last_seq } : null;

async function device() {
	const remote = remoteOf(args.db);
	const ops = {
		async load(c) {
			const out = await local.bulkDocs(c.docs, { new_edits: false });
			if (out.some((r) => r.error)) throw new Error('load: ' + JSON.stringify(out.filter((r) => r.error)));
			return { loaded: c.docs.length };
		},
		async put(c) {
			const out = await local.bulkDocs(c.docs);
			if (out.some((r) => r.error)) throw new Error('put: ' + JSON.stringify(out.filter((r) => r.error)));
			return { results: out.map((r) => ({ id: r.id, rev: r.rev })) };
		},
		async sync() {
			const pulled = [];
			const rep = local.sync(remote, { ...opts, retry: false, push: {}, pull: { selector } });
			rep.on('change', (info) => {
				if (info.direction === 'pull') for (const d of info.change.docs) pulled.push([d._id, d._rev]);
			});
			const res = await run(rep);
			return { push: counts(res.push), pull: counts(res.pull), pulled };
		},
		async fetch(c) { return fetchChunks(remote, c.ids); },
		// The plugin's pre-sync reads (FORMAT.md §5.2 steps 2 and 4) for
		// node c.node: the salt, and the milestone's lock verdict of
		// ensureRemoteIsCompatible step 6, without writing anything.
		async handshake(c) {
			const params = await remote.get('_local/obsidian_livesync_sync_parameters');
			let m = null;
			try { m = await remote.get('_local/obsydian_livesync_milestone'); } catch (e) { if (e.status !== 404) throw e; }
			let verdict = 'OK';
			if (m && m.locked) {
				if ((m.accepted_nodes || []).includes(c.node)) verdict = 'LOCKED';
				else verdict = m.cleaned ? 'NODE_CLEANED' : 'NODE_LOCKED';
			}
			return { salt: params.pbkdf2salt, locked: !!(m && m.locked), accepted_nodes: m ? m.accepted_nodes : [], verdict };
		},
		async docs() {
			const all = await local.allDocs({ include_docs: true });
			return { docs: all.rows.map((r) => r.doc) };
		},
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
}

try {
	if (args.mode === 'roundtrip') {
		const remote = remoteOf(args.db);
		const pulled = await run(local.replicate.from(remote, { ...opts, selector, retry: false }));
		const ids = JSON.parse(readFileSync(args.chunks, 'utf8'));
		const { fetched, requests } = await fetchChunks(remote, ids);
		const pushed = await run(local.replicate.to(remoteOf(args.db2), { ...opts, retry: false }));
		const info = await local.info();
		process.stdout.write(JSON.stringify({ pulled: pulled.docs_written, fetched, requests, pushed: pushed.docs_written, local: info.doc_count }) + '\n');
	} else if (args.mode === 'sync') {
		const remote = remoteOf(args.db);
		const rep = local.sync(remote, { live: true, retry: false, heartbeat: 30000, batch_size: 25, batches_limit: 25, push: {}, pull: { selector } });
		let ready = false, got = false;
		rep.on('error', (e) => die('sync error: ' + (e && (e.stack || e.message || JSON.stringify(e)))));
		rep.on('denied', (e) => die('denied: ' + JSON.stringify(e)));
		rep.on('paused', async (err) => {
			if (err) die('paused with an error: ' + JSON.stringify(err));
			if (!ready) {
				ready = true;
				await local.put({ _id: 'from-pouch', type: 'plain', path: 'from-pouch.md' });
				process.stdout.write('READY\n');
			}
		});
		const watch = local.changes({ live: true, since: 'now' }).on('change', (c) => {
			if (!got && c.id === args['wait-for']) {
				got = true;
				process.stdout.write('GOT ' + c.id + ' ' + c.changes[0].rev + '\n');
			}
		});
		process.stdin.resume();
		await new Promise((resolve) => process.stdin.on('end', resolve));
		rep.cancel();
		watch.cancel();
		const all = await local.allDocs();
		process.stdout.write('LOCAL ' + JSON.stringify(all.rows.map((r) => r.id)) + '\n');
	} else if (args.mode === 'device') {
		await device();
	} else {
		die('unknown mode ' + args.mode);
	}
	await local.destroy();
	process.exit(0);
} catch (e) {
	die(e && (e.stack || e.message || JSON.stringify(e)));
}
