// bench.mjs — the JavaScript half of the side-by-side E2EE V2 benchmark.
// It uses LiveSync's own crypto library (octagonal-wheels, hkdf module:
// encrypt/decrypt, exactly what commonlib's encryptHKDF/decryptHKDF call).
//
//   node bench.mjs gen   DIR   write DIR/js-ciphertexts.json (library encrypt)
//   node bench.mjs bench DIR   verify DIR/go-ciphertexts.json, then time
//                              decrypts of DIR/js-ciphertexts.json
//
// Results are printed as JSON lines: {"impl":"js","op":...,"chunksPerSec":...}.
import { readFileSync, writeFileSync } from "node:fs";
import { createHash, webcrypto } from "node:crypto";
import { encrypt, decrypt } from "octagonal-wheels/encryption/hkdf";

// Node 20 has no FileReader, which the library's browser base64 encoder
// uses for buffers of 32 KiB and more (only when *encrypting* the 1 MiB
// set here; Obsidian's Chromium has it). Minimal stand-in: readAsDataURL.
if (typeof globalThis.FileReader === "undefined") {
    globalThis.FileReader = class {
        readAsDataURL(blob) {
            blob.arrayBuffer().then((ab) => {
                this.result = `data:${blob.type};base64,` + Buffer.from(ab).toString("base64");
                this.onload?.({ target: this });
            });
        }
    };
}

const PASSPHRASE = "vector-passphrase";
// The interop vectors' PBKDF2 salt: SHA-256("livesync-vectors-pbkdf2-salt").
const SALT = new Uint8Array(createHash("sha256").update("livesync-vectors-pbkdf2-salt").digest());
// Chunk sizes and how many distinct chunks of each are generated.
const SETS = [
    { size: 256, count: 4000 },
    { size: 1024, count: 4000 },
    { size: 1 << 20, count: 8 },
];
const MIN_SECONDS = Number(process.env.BENCH_MIN_SECONDS ?? "1.5");
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? "40");
const pkg = JSON.parse(readFileSync(new URL("./node_modules/octagonal-wheels/package.json", import.meta.url)));

function sha256hex(s) {
    return createHash("sha256").update(s, "utf8").digest("hex");
}

// plaintext of n UTF-8 bytes: printable ASCII, like a text chunk.
function makePlain(n, seed) {
    const alphabet = "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,\n";
    let x = (seed * 2654435761) >>> 0 || 1;
    const out = new Array(n);
    for (let i = 0; i < n; i++) {
        x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
        out[i] = alphabet[x % alphabet.length];
    }
    return out.join("");
}

function emit(obj) {
    console.log(JSON.stringify({ impl: "js", octagonalWheels: pkg.version, node: process.version, ...obj }));
}

async function gen(dir) {
    const sets = [];
    for (const { size, count } of SETS) {
        const cts = [];
        const sums = [];
        for (let i = 0; i < count; i++) {
            const p = makePlain(size, size + i);
            cts.push(await encrypt(p, PASSPHRASE, SALT));
            sums.push(sha256hex(p));
        }
        sets.push({ size, ciphertexts: cts, plaintextSha256: sums });
    }
    writeFileSync(`${dir}/js-ciphertexts.json`, JSON.stringify({
        producer: `octagonal-wheels ${pkg.version} (encryption/hkdf encrypt)`,
        passphrase: PASSPHRASE,
        pbkdf2SaltBase64: Buffer.from(SALT).toString("base64"),
        sets,
    }));
}

// Times fn over the set in passes until MIN_SECONDS have elapsed.
async function timeSequential(cts) {
    for (const c of cts.slice(0, 50)) await decrypt(c, PASSPHRASE, SALT); // warm-up
    let n = 0;
    const t0 = performance.now();
    let el = 0;
    do {
        for (const c of cts) {
            await decrypt(c, PASSPHRASE, SALT);
            n++;
        }
        el = (performance.now() - t0) / 1000;
    } while (el < MIN_SECONDS);
    return n / el;
}

async function timeConcurrent(cts, k) {
    let n = 0;
    const t0 = performance.now();
    let el = 0;
    do {
        let next = 0;
        const worker = async () => {
            while (next < cts.length) {
                const c = cts[next++];
                await decrypt(c, PASSPHRASE, SALT);
                n++;
            }
        };
        await Promise.all(Array.from({ length: Math.min(k, cts.length) }, worker));
        el = (performance.now() - t0) / 1000;
    } while (el < MIN_SECONDS);
    return n / el;
}

async function bench(dir) {
    // Key derivation as the library does it (hkdf.ts deriveMasterKey):
    // importKey(raw passphrase) → deriveKey PBKDF2-SHA256 310000 → export.
    {
        const runs = 3;
        const t0 = performance.now();
        for (let i = 0; i < runs; i++) {
            const km = await webcrypto.subtle.importKey("raw", new TextEncoder().encode(PASSPHRASE), { name: "PBKDF2" }, false, ["deriveKey"]);
            const k = await webcrypto.subtle.deriveKey({ name: "PBKDF2", salt: SALT, iterations: 310000, hash: "SHA-256" }, km, { name: "AES-GCM", length: 256 }, true, ["encrypt", "decrypt"]);
            await webcrypto.subtle.exportKey("raw", k);
        }
        const s = (performance.now() - t0) / 1000 / runs;
        emit({ op: "derive-key (PBKDF2 310000)", size: 0, mode: "seq", chunksPerSec: 1 / s, secondsPerOp: s });
    }
    // Cross-compatibility: the library must open what Go wrote.
    const goFile = JSON.parse(readFileSync(`${dir}/go-ciphertexts.json`, "utf8"));
    let checked = 0;
    for (const set of goFile.sets) {
        for (let i = 0; i < set.ciphertexts.length; i++) {
            const p = await decrypt(set.ciphertexts[i], PASSPHRASE, SALT);
            if (sha256hex(p) !== set.plaintextSha256[i]) throw new Error(`JS could not decrypt Go ciphertext size ${set.size} #${i}`);
            checked++;
        }
    }
    emit({ op: "verify go ciphertexts", size: 0, mode: "check", verified: checked });

    const js = JSON.parse(readFileSync(`${dir}/js-ciphertexts.json`, "utf8"));
    for (const set of js.sets) {
        const seq = await timeSequential(set.ciphertexts);
        emit({ op: "decrypt", size: set.size, mode: "seq", chunksPerSec: seq });
        const par = await timeConcurrent(set.ciphertexts, CONCURRENCY);
        emit({ op: "decrypt", size: set.size, mode: `conc${CONCURRENCY}`, chunksPerSec: par });
    }
    // Encrypt 1 KiB sequentially, for reference.
    {
        const p = makePlain(1024, 7);
        for (let i = 0; i < 50; i++) await encrypt(p, PASSPHRASE, SALT);
        let n = 0;
        const t0 = performance.now();
        let el = 0;
        do {
            for (let i = 0; i < 1000; i++) { await encrypt(p, PASSPHRASE, SALT); n++; }
            el = (performance.now() - t0) / 1000;
        } while (el < MIN_SECONDS);
        emit({ op: "encrypt", size: 1024, mode: "seq", chunksPerSec: n / el });
    }
}

const [cmd, dir] = process.argv.slice(2);
if (cmd === "gen" && dir) await gen(dir);
else if (cmd === "bench" && dir) await bench(dir);
else {
    console.error("usage: node bench.mjs gen|bench DIR");
    process.exit(2);
}
