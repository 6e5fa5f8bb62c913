// genvectors.mjs writes upstream.json: Setup URIs made as the plugin makes
// them (commonlib src/API/processSetting.ts encodeSettingsToSetupURI:
// configURIBase + encodeURIComponent(encryptString(JSON.stringify(settings),
// passphrase)) + " "), with the real octagonal-wheels, plus one in the
// legacy V1 "%" form of older plugins (e2ee_v2 encrypt). Run from a
// folder whose node_modules holds octagonal-wheels (for example
// tests/bench/e2ee after npm ci): node <path>/genvectors.mjs
import { writeFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const load = async (p) => import(pathToFileURL(`${process.cwd()}/node_modules/octagonal-wheels/dist/${p}.js`).href);
const hkdf = await load("encryption/hkdf");
const enc = await load("encryption/encryption");

const base = "obsidian://setuplivesync?settings=";
const couch = {
    remoteType: "", useCustomRequestHandler: false,
    couchDB_URI: "https://couch.example.org:6984", couchDB_USER: "alice", couchDB_PASSWORD: "pw: ü+/=&?",
    couchDB_DBNAME: "obsidiannotes", liveSync: true, minimumChunkSize: 20,
    encrypt: true, passphrase: "vault passphrase ✓", usePathObfuscation: true,
    customChunkSize: 60, readChunksOnline: true, hashAlg: "xxhash64", E2EEAlgorithm: "v2",
    chunkSplitterVersion: "v3-rabin-karp", handleFilenameCaseSensitive: false,
    concurrencyOfReadChunksOnline: 30, minimumIntervalOfReadChunksOnline: 25,
    enableCompression: false, useDynamicIterationCount: false, deviceAndVaultName: "",
    configPassphraseStore: "", encryptedPassphrase: "", encryptedCouchDBConnection: "",
};
const s3 = {
    remoteType: "MINIO", endpoint: "http://127.0.0.1:7070", accessKey: "minioadmin", secretKey: "minio secret",
    bucket: "livesync", bucketPrefix: "vault1/", region: "us-east-1", forcePathStyle: true,
    useCustomRequestHandler: false, encrypt: true, passphrase: "p", usePathObfuscation: false,
    customChunkSize: 10, E2EEAlgorithm: "v2", hashAlg: "xxhash64", chunkSplitterVersion: "v3-rabin-karp",
    configPassphraseStore: "", encryptedPassphrase: "", encryptedCouchDBConnection: "",
};
const setupPassphrase = "setup passphrase 123";
const uri = async (o) => `${base}${encodeURIComponent(await hkdf.encryptWithEphemeralSalt(JSON.stringify(o), setupPassphrase))} `;
const out = {
    description: "Setup URIs made by octagonal-wheels as the plugin makes them; see genvectors.mjs",
    setupPassphrase,
    vectors: [
        { name: "couchdb", settings: couch, uri: await uri(couch) },
        { name: "s3", settings: s3, uri: await uri(s3) },
        {
            name: "legacy-v1", settings: couch,
            uri: `${base}${encodeURIComponent(await enc.encrypt(JSON.stringify(couch), setupPassphrase, false))}`,
        },
    ],
};
writeFileSync(new URL("./upstream.json", import.meta.url), JSON.stringify(out, null, 1) + "\n");
