// The 10k-note E2EE vault the pull and cold-start benchmarks read:
// generated Markdown files of ~1 KiB, imported into a relay database by the
// project's CLI (livesync import --encrypt --obfuscate-paths), so it is
// exactly what a LiveSync client would have pushed.
import { execFile } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { goBuild, tempDir, freshName } from "../../browser/harness.mjs";

const execFileP = promisify(execFile);

// A fixed, non-secret benchmark passphrase (the vault is thrown away).
export const passphrase = "browser-bench passphrase";

// noteText is note i's text: `size` bytes of printable ASCII, different per note.
export function noteText(i, size) {
  const words = ["alpha", "beta", "gamma", "delta", "sync", "vault", "note", "chunk", "relay", "pouch", "wasm", "idb"];
  let x = (i * 2654435761) >>> 0 || 1;
  let s = `# Note ${i}\n\n`;
  while (s.length < size) {
    x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
    s += words[x % words.length] + (x % 11 === 0 ? ".\n" : " ");
  }
  return s.slice(0, size - 1) + "\n";
}

export function notePath(i) {
  return `notes/${String(Math.floor(i / 100)).padStart(3, "0")}/note-${String(i).padStart(5, "0")}.md`;
}

/** Writes `docs` notes into a folder and imports them into a new database of relay. */
export async function prepareVault(relay, { docs = 10000, size = 1024 } = {}) {
  const dir = tempDir("browser-bench-vault-");
  const files = path.join(dir, "files");
  for (let i = 0; i < docs; i++) {
    const p = path.join(files, notePath(i));
    mkdirSync(path.dirname(p), { recursive: true });
    writeFileSync(p, noteText(i, size));
  }
  const db = freshName("bench");
  const cli = await goBuild("./cmd/livesync");
  const u = new URL(relay.url);
  const remote = `${u.protocol}//${relay.user}@${u.host}/${db}`;
  const t0 = performance.now();
  await execFileP(cli, ["import", files, remote, "--encrypt", "--obfuscate-paths", "--store", path.join(dir, "store.db"), "--quiet"], {
    env: { ...process.env, LIVESYNC_PASSWORD: relay.password, LIVESYNC_PASSPHRASE: passphrase, HOME: dir },
    maxBuffer: 16 << 20,
  });
  return { url: `${relay.url}/${db}`, db, docs, size, importMs: performance.now() - t0 };
}
