// table.mjs RESULTS... — prints the median chunks/s per (op, size, mode)
// for Go and JS over all runs, and the ratio Go/JS.
import { readFileSync } from "node:fs";

const rows = new Map(); // key → {go: [], js: []}
const meta = {};
for (const f of process.argv.slice(2)) {
    for (const line of readFileSync(f, "utf8").split("\n")) {
        if (!line.startsWith("{")) continue;
        const r = JSON.parse(line);
        if (r.chunksPerSec === undefined) continue;
        if (r.impl === "js") meta.js = `octagonal-wheels ${r.octagonalWheels}, Node ${r.node}`;
        if (r.impl === "go") meta.go = `${r.go}, GOMAXPROCS=${r.gomaxprocs}`;
        const key = `${r.op}|${r.size}|${r.mode}`;
        if (!rows.has(key)) rows.set(key, { go: [], js: [] });
        rows.get(key)[r.impl].push(r.chunksPerSec);
    }
}
const median = (a) => {
    if (a.length === 0) return NaN;
    const s = [...a].sort((x, y) => x - y);
    const m = s.length >> 1;
    return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const sizeName = (n) => (n === 0 ? "" : n >= 1 << 20 ? `${n >> 20} MiB` : n >= 1024 ? `${n >> 10} KiB` : `${n} B`);
const fmt = (x) => (isNaN(x) ? "-" : x >= 100 ? Math.round(x).toLocaleString("en-US") : x.toFixed(2));
const out = [["op", "size", "mode", "Go chunks/s", "JS chunks/s", "Go/JS", "runs"]];
for (const [key, v] of rows) {
    const [op, size, mode] = key.split("|");
    const g = median(v.go), j = median(v.js);
    out.push([op, sizeName(Number(size)), mode, fmt(g), fmt(j), isNaN(g / j) ? "-" : `${(g / j).toFixed(1)}x`, `${v.go.length}/${v.js.length}`]);
}
const w = out[0].map((_, i) => Math.max(...out.map((r) => r[i].length)));
console.log(`Go: ${meta.go}   JS: ${meta.js}   (medians over runs)`);
for (const [i, r] of out.entries()) {
    console.log(r.map((c, k) => (k < 3 ? c.padEnd(w[k]) : c.padStart(w[k]))).join("  "));
    if (i === 0) console.log(w.map((n) => "-".repeat(n)).join("  "));
}
