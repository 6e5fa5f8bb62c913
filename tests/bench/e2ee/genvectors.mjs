// genvectors.mjs writes engine/e2ee/testdata/upstream.json: vectors for the
// legacy and "%$" forms made by the real octagonal-wheels (the library
// LiveSync uses) with a deterministic random source, for the formats that
// engine/testdata/vectors does not cover. Run: node genvectors.mjs
import { writeFileSync, readFileSync } from "node:fs";
import { createHash } from "node:crypto";

// Deterministic randomness: SHA-256 counter stream. Installed before the
// library is loaded (it captures globalThis.crypto at import time, but
// looks getRandomValues up on every call).
let ctr = 0;
let stream = Buffer.alloc(0);
function take(n) {
    while (stream.length < n) {
        stream = Buffer.concat([stream, createHash("sha256").update("livesync-go-upstream-" + ctr++).digest()]);
    }
    const out = stream.subarray(0, n);
    stream = stream.subarray(n);
    return out;
}
const drawn = [];
globalThis.crypto.getRandomValues = (arr) => {
    const b = take(arr.byteLength);
    new Uint8Array(arr.buffer, arr.byteOffset, arr.byteLength).set(b);
    drawn.push(b.toString("hex"));
    return arr;
};

const enc = await import("octagonal-wheels/encryption/encryption");
const v3 = await import("octagonal-wheels/encryption/encryptionv3");
const hkdf = await import("octagonal-wheels/encryption/hkdf");
const pkg = JSON.parse(readFileSync(new URL("./node_modules/octagonal-wheels/package.json", import.meta.url)));

const passphrase = "vector-passphrase";
const plain = "Hello, LiveSync!\n";
const unicode = "ユニコード ✔️ 𠮷 👩‍💻 café\r\nline2";
const out = {
    description:
        "Made by genvectors.mjs (bench/e2ee) with the real octagonal-wheels and a deterministic getRandomValues; " +
        "covers forms that engine/testdata/vectors does not: V1 path obfuscation, %~ (V3), the oldest [..] JSON form, " +
        "%$ (ephemeral PBKDF2 salt) and the legacy binary layout.",
    octagonalWheels: pkg.version,
    node: process.version,
    passphrase,
    obfuscatePath: [],
    v3: [],
    jsonForm: [],
    salted: [],
    legacyBinary: [],
};
for (const dyn of [false, true]) {
    for (const p of ["notes/secret.md", "Mixed Case/Ünïcode Ñame.md"]) {
        out.obfuscatePath.push({ path: p, useDynamicIterationCount: dyn, obfuscated: await enc.obfuscatePath(p, passphrase, dyn) });
    }
}
for (const p of [plain, unicode]) {
    out.v3.push({ plaintext: p, ciphertext: await v3.encryptV3(p, passphrase) });
}
for (const dyn of [false, true]) {
    for (const p of [plain, unicode]) {
        out.jsonForm.push({ plaintext: p, useDynamicIterationCount: dyn, ciphertext: await enc.encryptV1(p, passphrase, dyn) });
    }
}
// %$ with the vectors' PBKDF2 salt forced as the session salt.
const vecSalt = Buffer.from("Lqn/qHNB1vkpycUB7XlzFf29yPwvOtVnJwXL5nlzO2w=", "base64");
for (const p of [plain, unicode]) {
    stream = Buffer.concat([vecSalt, stream]);
    drawn.length = 0;
    const c = await hkdf.encryptWithEphemeralSalt(p, passphrase, true);
    out.salted.push({ plaintext: p, drawnHex: [...drawn], ciphertext: c });
}
for (const dyn of [true]) {
    const bin = await enc.encryptBinary(new TextEncoder().encode(unicode), passphrase, dyn);
    out.legacyBinary.push({ plaintext: unicode, useDynamicIterationCount: dyn, hex: Buffer.from(bin).toString("hex") });
}
// Sanity: the library decrypts its own output.
for (const v of out.salted) if ((await hkdf.decryptWithEphemeralSalt(v.ciphertext, passphrase)) !== v.plaintext) throw new Error("salted");
for (const v of out.jsonForm) if ((await enc.decrypt(v.ciphertext, passphrase, v.useDynamicIterationCount)) !== v.plaintext) throw new Error("json");
for (const v of out.v3) if ((await enc.decrypt(v.ciphertext, passphrase, false)) !== v.plaintext) throw new Error("v3");
for (const v of out.obfuscatePath) if ((await enc.decrypt(v.obfuscated, passphrase, v.useDynamicIterationCount)) !== v.path) throw new Error("path");
writeFileSync(new URL("../../../engine/e2ee/testdata/upstream.json", import.meta.url), JSON.stringify(out, null, 1) + "\n");
console.log("wrote engine/e2ee/testdata/upstream.json");
