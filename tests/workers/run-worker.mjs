// Runs the Worker (wasm/workers/dist) under workerd through miniflare,
// with a local D1 database (SQLite) bound as DB and its migration
// applied, on 127.0.0.1 at a free port. Prints one JSON line
// {"url": "...", "loadMs": n} to stdout when it serves, then runs until
// stdin closes or it gets SIGTERM/SIGINT.
//
//   node run-worker.mjs --dist DIR [--migrations DIR] [--persist DIR]
//
// The Worker's vars and secrets come from the environment: every
// variable named LIVESYNC_* is passed as a binding (LIVESYNC_USERS etc.).
import { Log, LogLevel, Miniflare } from 'miniflare';
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

function die(msg) {
	process.stderr.write(`run-worker.mjs: ${msg}\n`);
	process.exit(1);
}

const args = {};
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i += 2) {
	if (!argv[i].startsWith('--') || i + 1 >= argv.length) die(`bad argument ${argv[i]}`);
	args[argv[i].slice(2)] = argv[i + 1];
}
if (!args.dist) die('--dist is required');
const dist = resolve(args.dist);

const bindings = {};
for (const [k, v] of Object.entries(process.env)) {
	if (k.startsWith('LIVESYNC_')) bindings[k] = v;
}

const started = performance.now();
const mf = new Miniflare({
	// worker.mjs is the entry; every other .mjs/.js/.wasm file of dist is a
	// module it may import.
	modules: [
		{ type: 'ESModule', path: join(dist, 'worker.mjs') },
		...readdirSync(dist).filter((f) => f !== 'worker.mjs').sort().flatMap((f) =>
			f.endsWith('.wasm') ? [{ type: 'CompiledWasm', path: join(dist, f) }]
				: /\.m?js$/.test(f) ? [{ type: 'ESModule', path: join(dist, f) }] : []),
	],
	modulesRoot: dist,
	compatibilityDate: '2026-07-01',
	bindings,
	d1Databases: { DB: 'livesync-local' },
	d1Persist: args.persist ? resolve(args.persist) : false,
	// RUN_WORKER_DEBUG=1 logs every request and workerd's own messages.
	log: process.env.RUN_WORKER_DEBUG ? new Log(LogLevel.DEBUG) : undefined,
	// POST /cdn-cgi/handler/scheduled?cron=... runs the Cron Trigger's task.
	unsafeTriggerHandlers: true,
	host: '127.0.0.1',
	port: 0,
});

let url;
try {
	url = await mf.ready;
	if (args.migrations) {
		const db = await mf.getD1Database('DB');
		const files = readdirSync(args.migrations).filter((f) => f.endsWith('.sql')).sort();
		for (const f of files) {
			const sql = readFileSync(join(args.migrations, f), 'utf8');
			// D1's exec runs one statement per line: join each statement onto one line.
			const stmts = sql.replace(/--[^\n]*/g, '').split(';').map((s) => s.replace(/\s+/g, ' ').trim()).filter(Boolean);
			for (const s of stmts) await db.exec(s + ';');
		}
	}
} catch (e) {
	die(`miniflare: ${e?.stack ?? e}`);
}
process.stdout.write(JSON.stringify({ url: url.toString(), loadMs: Math.round(performance.now() - started) }) + '\n');

let stopping = false;
async function stop() {
	if (stopping) return;
	stopping = true;
	await mf.dispose().catch(() => {});
	process.exit(0);
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
process.stdin.on('end', stop);
process.stdin.on('close', stop);
process.stdin.resume();
