// A real PouchDB 9 client reading and writing a note's revision history
// on a CouchDB-protocol server, as Self-hosted LiveSync does: its
// file-history view calls get(id, {revs_info: true}) and then
// get(id, {rev}) for every entry whose status is "available".
//
//   node history.mjs --url URL --db NAME --step STEP --id ID [--n N]
//
// Steps (each prints one JSON object on stdout):
//   write    the note's first version and N-1 edits (db.put, new_edits
//            true); each version's text is in a chunk written first.
//            → {"revs": [oldest … newest]}
//   load     N revisions of the note replicated in (bulkDocs with
//            new_edits: false and _revisions), oldest first, in one call.
//            → {"revs": [oldest … newest]}
//   history  the history view's reads.
//            → {"revs_info": [{rev, status} …], "docs": {rev: doc}}
//   compact  db.compact() (POST _compact, then GET / until
//            compact_running is false). → {"ok": true}
//
// The credentials come from LIVESYNC_TEST_COUCHDB_USER and
// LIVESYNC_TEST_COUCHDB_PASSWORD. Exit status 0 only if every call
// succeeded.
import { createRequire } from 'node:module';
import { createHash } from 'node:crypto';

const require = createRequire(import.meta.url);
const PouchDB = require('pouchdb-node');

function die(msg) {
	process.stderr.write(`history.mjs: ${msg}\n`);
	process.exit(1);
}

const args = {};
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i += 2) {
	if (!argv[i].startsWith('--') || i + 1 >= argv.length) die(`bad argument ${argv[i]}`);
	args[argv[i].slice(2)] = argv[i + 1];
}
const { url, db, step, id } = args;
const n = Number(args.n ?? '1');
if (!url || !db || !step || !id) die('--url, --db, --step and --id are required');
const user = process.env.LIVESYNC_TEST_COUCHDB_USER ?? '';
const password = process.env.LIVESYNC_TEST_COUCHDB_PASSWORD ?? '';

const remote = new PouchDB(`${url.replace(/\/+$/, '')}/${encodeURIComponent(db)}`, {
	adapter: 'http',
	skip_setup: true, // as LiveSync: never create the remote database
	auth: user ? { username: user, password } : undefined,
});

const md5 = (s) => createHash('md5').update(s).digest('hex');

// chunk is a LiveSync leaf holding one version's text; meta the note's
// metadata naming it (plain, not encrypted, so the relay's hold-back can
// read its children).
function chunk(text) {
	return { _id: 'h:' + md5(text).slice(0, 12), type: 'leaf', data: text };
}
function meta(k, c) {
	return {
		_id: id, path: id, type: 'plain', children: [c._id],
		ctime: 1700000000000, mtime: 1700000000000 + k, size: c.data.length, eden: {},
	};
}

async function putChunk(c) {
	try {
		await remote.put(c);
	} catch (e) {
		if (e.status !== 409) throw e; // content-addressed: already there
	}
}

async function run() {
	switch (step) {
	case 'write': {
		const revs = [];
		for (let k = 1; k <= n; k++) {
			const c = chunk(`${id}: version ${k}\n`);
			await putChunk(c);
			const doc = meta(k, c);
			if (revs.length) doc._rev = revs[revs.length - 1];
			const res = await remote.put(doc);
			revs.push(res.rev);
		}
		return { revs };
	}
	case 'load': {
		const docs = [], hashes = [], revs = [];
		for (let k = 1; k <= n; k++) {
			const c = chunk(`${id}: replicated version ${k}\n`);
			await putChunk(c);
			hashes.unshift(md5(`${id} ${k}`));
			const doc = meta(k, c);
			doc._rev = `${k}-${hashes[0]}`;
			doc._revisions = { start: k, ids: [...hashes] };
			docs.push(doc);
			revs.push(doc._rev);
		}
		const res = await remote.bulkDocs(docs, { new_edits: false });
		const errors = res.filter((r) => r.error);
		if (errors.length) die(`bulkDocs: ${JSON.stringify(errors)}`);
		return { revs };
	}
	case 'history': {
		// The plugin's DocumentHistoryModal: revs_info, then each
		// available revision.
		const w = await remote.get(id, { revs_info: true });
		const info = w._revs_info ?? [];
		const docs = {};
		for (const e of info.filter((e) => e?.status === 'available')) {
			docs[e.rev] = await remote.get(id, { rev: e.rev });
		}
		return { revs_info: info, docs };
	}
	case 'compact':
		return await remote.compact();
	default:
		die(`unknown step ${step}`);
	}
}

run().then(
	(out) => process.stdout.write(JSON.stringify(out) + '\n'),
	(e) => die(`${step}: ${e.status ?? ''} ${e.name ?? ''} ${e.message ?? e}`),
);
