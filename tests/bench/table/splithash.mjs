// The JavaScript side of splithash (tests/bench/table/splithash/main.go):
// LiveSync's default splitter, splitPiecesRabinKarp of commonlib
// (src/string_and_binary/chunks.ts: a 48-byte Rabin–Karp rolling hash over
// the UTF-8 bytes, written here as the plug-in runs it for a note), and
// the chunk id LiveSync gives each piece with octagonal-wheels' xxhash
// (xxhash64 of "piece-length", base 36). Uses tests/bench/e2ee's
// octagonal-wheels.
//
//   node splithash.mjs --dir VAULT [--min 1]
//
// Prints one JSON line like the Go side's.
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { createHash } from 'node:crypto';
import path from 'node:path';

const { xxhashNew } = await import(new URL('../e2ee/node_modules/octagonal-wheels/dist/hash/xxhash.js', import.meta.url));
const pkg = JSON.parse(readFileSync(new URL('../e2ee/node_modules/octagonal-wheels/package.json', import.meta.url)));
const args = { min: '1' };
for (let i = 2; i + 1 < process.argv.length; i += 2) args[process.argv[i].slice(2)] = process.argv[i + 1];

function walk(dir, base = dir, out = []) {
	for (const name of readdirSync(dir)) {
		const p = path.join(dir, name);
		if (statSync(p).isDirectory()) walk(p, base, out);
		else out.push({ path: path.relative(base, p), text: readFileSync(p, 'utf8') });
	}
	return out;
}
const files = walk(args.dir).sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
const bytes = files.reduce((n, f) => n + Buffer.byteLength(f.text), 0);

// Sizes for a text note below 4 MiB with LiveSync's defaults: unit 64
// (grown so that a note makes at most 500 chunks); min 2, avg 4, max 16 units.
function sizes(n) {
	let unit = 64;
	const over = n - 4 * 500 * unit;
	if (over > 0) unit += 32 * Math.ceil(over / (4 * 500 * 32));
	return { min: unit * 2, avg: unit * 4, max: unit * 16 };
}
const WINDOW = 48, P = 31;
let P_POW = 1;
for (let i = 0; i < WINDOW - 1; i++) P_POW = Math.imul(P_POW, P);
const encoder = new TextEncoder(), decoder = new TextDecoder();

function* splitRabinKarp(text) {
	const buf = encoder.encode(text);
	const { min, avg, max } = sizes(buf.length);
	let hash = 0, start = 0;
	for (let i = 0; i < buf.length; i++) {
		if (i >= start + WINDOW) hash = (Math.imul(hash - Math.imul(buf[i - WINDOW], P_POW), P) + buf[i]) | 0;
		else hash = (Math.imul(hash, P) + buf[i]) | 0;
		const len = i - start + 1;
		if (((len >= min && (hash >>> 0) % avg === 1) || len >= max) &&
			(i + 1 === buf.length || (buf[i + 1] & 0xc0) !== 0x80)) {
			yield decoder.decode(buf.subarray(start, i + 1));
			start = i + 1;
		}
	}
	if (start < buf.length) yield decoder.decode(buf.subarray(start));
}

const xx = await xxhashNew();
const chunkId = (piece) => 'h:' + xx.h64(`${piece}-${piece.length}`).toString(36);
function pass(each) {
	for (const f of files) for (const piece of splitRabinKarp(f.text)) each(chunkId(piece));
}
const digest = createHash('sha256');
let chunks = 0;
pass((id) => { chunks++; digest.update(id + '\n'); });
let n = 0;
const start = process.hrtime.bigint();
const elapsed = () => Number(process.hrtime.bigint() - start) / 1e9;
while (n === 0 || elapsed() < Number(args.min)) { pass(() => {}); n++; }
const s = elapsed();
process.stdout.write(JSON.stringify({ impl: 'js', notesPerSec: (n * files.length) / s, mbPerSec: (n * bytes) / s / 1e6,
	chunks, idsDigest: digest.digest('hex').slice(0, 16), octagonalWheels: pkg.version, node: process.version }) + '\n');
