// Types of the loader (index.mjs) and of the API of livesync.wasm.

/** A fetch-compatible function: the host's HTTP (fetch, or an adapter over a plugin's requestUrl). */
export type HostFetch = (url: string, init: {
  method: string;
  headers: Record<string, string>;
  body?: BufferSource;
  signal?: AbortSignal;
}) => Promise<{
  status: number;
  headers: { forEach(fn: (value: string, key: string) => void): void } | Record<string, string>;
  body?: ReadableStream<Uint8Array> | null;
  arrayBuffer?(): Promise<ArrayBuffer>;
}>;

/** The stable codes of LivesyncError.code. */
export type ErrorCode =
  | "cancelled" | "closed" | "bad_options" | "need_passphrase" | "wrong_passphrase"
  | "locked" | "settings_mismatch" | "incompatible" | "unauthorized" | "unreachable"
  | "no_database" | "no_vault" | "missing_chunks" | "not_found" | "bad_path"
  | "too_large" | "malformed" | "unsupported" | "busy" | "error";

/** Every failure of the API is an Error carrying these. */
export interface LivesyncError extends Error {
  code: ErrorCode;
  /** The engine's stage that failed ("transport", "auth", "decrypt", …), "" if none. */
  stage: string;
  /** The document concerned, "" if none. */
  docId: string;
}

/** A CouchDB database (the default kind). create: make the database and the vault when missing. */
export interface CouchDBRemote { kind?: "couchdb"; url: string; user?: string; password?: string; create?: boolean }

/**
 * An S3 bucket holding the vault's journal (the plugin's MINIO remote type; the bucket must exist).
 * endpoint: "https://host[:port]" ("http://" for plain HTTP; a bare host[:port] is HTTPS).
 * region: the region requests are signed for; absent or "" asks the server (GetBucketLocation).
 * prefix: the plugin's bucket prefix ("my-vault/"). create: write a new vault to an empty prefix.
 * Builds without the S3 adapter (-tags nos3) refuse it with code "unsupported".
 */
export interface S3Remote {
  kind: "s3"; endpoint: string; bucket: string; accessKey: string; secretKey: string;
  region?: string; prefix?: string; create?: boolean;
}

export interface OpenOptions {
  /** The plugin's settings object (encrypt, usePathObfuscation, customChunkSize, couchDB_URI, …). */
  settings?: Record<string, unknown>;
  /** The plugin's Setup URI (obsidian://setuplivesync?settings=…), with setupPassphrase. */
  setupURI?: string;
  setupPassphrase?: string;
  /** The vault's E2EE passphrase; wins over the settings'. */
  passphrase?: string;
  /** The remote (a CouchDB database or an S3 bucket); wins over the settings' remote. */
  remote?: CouchDBRemote | S3Remote;
  /**
   * Where the replica lives: "memory" (the default; gone at close) or IndexedDB, which keeps it
   * across reloads: "indexeddb" is the database "livesync-go", {kind: "indexeddb", name} another.
   * One vault handle per database at a time: a second open (another tab too) fails with code "busy".
   */
  storage?: "memory" | "indexeddb" | { kind: "indexeddb"; name?: string } | { kind: "memory" };
  /** How this device names itself in the remote's milestone. */
  device?: string;
  host?: { fetch?: HostFetch };
}

export interface Progress { read: number; written: number; failures: number }
export interface SyncResult { pull: Progress; push: Progress }

export interface FileInfo {
  path: string;
  size: number;
  /** Milliseconds since the epoch. */
  mtime: number;
  ctime: number;
  rev: string;
  deleted: boolean;
  /** The file's chunks have not all arrived: it cannot be read yet. */
  held: boolean;
  chunks: number;
  localChunks: number;
}

export interface HeldFile extends FileInfo {
  /** Chunks missing locally. */
  missing: number;
  source: string;
  since?: number;
  /** When a hunt last looked for its chunks (ms since the epoch), and what it found. */
  lastAttempt?: number;
  lastResult?: string;
  /** Why it is still held, after a hunt. */
  reasons?: HuntReason[];
}

/** Why chunks of a file are still missing after a hunt. */
export interface HuntReason {
  chunks: number;
  /** The remote that failed; absent when no remote had the chunks. */
  source?: string;
  /** "missing_chunks" when no remote had them, else the failure's code. */
  code: ErrorCode;
  message: string;
}

export interface HuntSource {
  remote: string;
  /** False for a remote that cannot fetch chunks by id (not asked). */
  canFetch: boolean;
  requests: number;
  found: number;
  missing: number;
  failed: number;
  /** Chunks found. */
  chunks: number;
}

export interface HuntResult {
  /** Files whose chunks are all local now (missing: the chunks fetched). */
  released: HeldFile[];
  /** Files still held, with their reasons. */
  held: HeldFile[];
  sources: HuntSource[];
  /** Chunks the released files were missing, of total the hunted files were. */
  found: number;
  total: number;
  /** The hunt's timeout ended it: held are the files still held then. */
  timedOut: boolean;
}

/** One diagnosis of doctor(). */
export interface Finding {
  /** What was examined: "server", "login", "database", "version", "salt", "milestone", "settings", "passphrase", "chunks", "bucket", … */
  check: string;
  status: "ok" | "warning" | "problem" | "skipped";
  message: string;
  details?: string[];
  /** What to do about a warning or a problem. */
  advice?: string;
  /** The actions the advice names. */
  actions?: ("push" | "pull" | "pull-rebuild-local" | "pull-fresh" | "unlock" | "push-rebuild")[];
  /** For a problem: the code a sync would fail with ("unreachable", "unauthorized", "no_database", "locked", "settings_mismatch", "wrong_passphrase", …). */
  code?: ErrorCode;
}

/** A snapshot of the vault for a status display. */
export interface VaultStatus {
  /** Held files, and the distinct chunks they wait for. */
  held: number;
  pendingChunks: number;
  heldPaths: string[];
  /** Live and deleted files. */
  files: number;
  deleted: number;
  /** The replica's documents and chunk documents. */
  docs: number;
  chunks: number;
  remotes: { id: string; attached: boolean; quarantined: number; lastPull?: number; lastPush?: number }[];
  /** Chunk reads from the remote. */
  fetch: { pending: number; inFlight: number; requests: number; delivered: number; failures: number };
}

export interface WriteResult {
  path: string; size: number; mtime: number; ctime: number; rev: string; deleted: boolean;
  unchanged: boolean;
  newChunks: number;
}

export interface VaultEvent {
  /** "created" | "changed" | "deleted" | "held" | "released" | "held-count" | "hunt-found" | "sync-progress" | "sync-written" | "sync-retrying" | "sync-started" | "sync-stopped" | … */
  kind: string;
  path?: string;
  docId?: string;
  rev?: string;
  remote?: string;
  direction?: "pull" | "push" | "sync";
  /** Chunks a held file lacks ("held"). */
  missing?: number;
  /** Held files, and the distinct chunks they wait for ("held-count", on "held" and "status"). */
  held?: number;
  pendingChunks?: number;
  read?: number;
  written?: number;
  pending?: number;
  what?: string;
  delayMs?: number;
  found?: number;
  total?: number;
  error?: { message: string; code: ErrorCode; stage: string; docId: string };
}

export interface LiveSync {
  /** Ends the live sync; resolves when it has ended. */
  stop(): Promise<void>;
  /** Settles when the live sync ends: resolved when stopped or closed, rejected when it failed. */
  done: Promise<void>;
}

/** vault.p2p()'s options: the plugin's P2P settings. */
export interface P2POptions {
  /** The room (the plugin's P2P_roomID, its group). */
  roomId: string;
  /** The room's passphrase (P2P_passphrase); "" or absent for none. */
  passphrase?: string;
  /** Nostr relays for the signalling (P2P_relays): ws:// or wss:// URLs. */
  relays: string[];
  /** Trystero's appId (P2P_AppID); default "self-hosted-livesync". */
  appId?: string;
  /** The advertised device name (default "livesync-go-wasm"). */
  deviceName?: string;
  /** The vault's name: the database is NAME-livesync-v2 (default "livesync-go"). */
  vaultName?: string;
  /** The advertised platform (default "server"). */
  platform?: string;
  /** Patterns (comma-separated regular expressions) of device names accepted or denied without asking. */
  autoAccept?: string;
  autoDeny?: string;
  /** Patterns of device names whose legacy/onProgress makes this peer pull from them. */
  follow?: string;
  /**
   * Asked about a peer no pattern or earlier answer covers: true/false (for this session), or
   * {accept, temporary: false} to remember it by device name while the peer object lives.
   * Without it, such peers are refused.
   */
  ask?: (ad: P2PAdvertisement) => boolean | { accept: boolean; temporary?: boolean } | Promise<boolean | { accept: boolean; temporary?: boolean }>;
  /** STUN server URLs; default trystero's list, [] for none (host candidates only). */
  stun?: string[];
  turn?: { urls: string | string[]; username?: string; credential?: string }[];
  /** ICE transport policy "relay" (needs a TURN server). */
  relayOnly?: boolean;
  /** The host's constructors; default globalThis.RTCPeerConnection and globalThis.WebSocket. */
  host?: { RTCPeerConnection?: unknown; WebSocket?: unknown };
}

export interface P2PAdvertisement { peerId: string; name: string; platform: string }

export interface P2PPeerEvent {
  kind: "join" | "leave" | "error";
  peerId: string;
  /** On "error": "wrong_room_passphrase" when the peer's room passphrase differs. */
  error?: { message: string; code: ErrorCode | "wrong_room_passphrase"; stage: string; docId: string };
}

export interface P2PProgressEvent {
  peerId: string;
  /** false: this peer pulls from peerId; true: peerId acknowledged pulling from this peer. */
  sending: boolean;
  /** The replication ended (no lastSeq then). */
  done: boolean;
  lastSeq?: number;
  maxSeqInBatch?: number;
}

export interface P2PResult { peerId: string; docs: number; batches: number; tweakMismatch: string[] }

/** A vault's P2P peer (livesync-p2p.wasm only). */
export interface P2PPeer {
  /** This peer's Trystero id. */
  id: string;
  /** The peers present that advertised themselves. */
  peers(): Promise<P2PAdvertisement[]>;
  /**
   * The plugin's sync with a peer named by id or device name (waiting up to wait ms, default
   * 30 s, for it): pull from it, then ask it to pull from this vault (legacy/reqSync).
   */
  sync(peer: string, options?: { wait?: number; rewind?: boolean }): Promise<P2PResult>;
  pull(peer: string, options?: { wait?: number; rewind?: boolean }): Promise<P2PResult>;
  /** Tells the peers that this vault changed (legacy/onProgress); followers pull. */
  notify(): Promise<void>;
  on(topic: "peer", fn: (e: P2PPeerEvent) => void): () => void;
  on(topic: "progress", fn: (e: P2PProgressEvent) => void): () => void;
  /** Leaves the room (closing the vault does too). */
  close(): Promise<void>;
}

export interface Vault {
  /**
   * sync(), pull(), push() and live() first check the remote again, as the plugin does: a remote
   * another device rebuilt since open() refuses a replica that holds documents (code "locked").
   */
  sync(): Promise<SyncResult>;
  pull(options?: { metadataOnly?: boolean }): Promise<SyncResult>;
  push(): Promise<SyncResult>;
  live(options?: { metadataOnly?: boolean }): Promise<LiveSync>;
  list(prefix?: string, options?: { deleted?: boolean }): Promise<FileInfo[]>;
  read(path: string): Promise<Uint8Array>;
  read(path: string, options: { text: true }): Promise<string>;
  write(path: string, data: string | Uint8Array | ArrayBuffer | ArrayBufferView,
    options?: { mtime?: number; ctime?: number }): Promise<WriteResult>;
  delete(path: string): Promise<{ path: string; rev: string }>;
  held(): Promise<HeldFile[]>;
  /**
   * Fetches the chunks the held files lack from the remote. once: ask once for every chunk,
   * then report; otherwise keep hunting (with backoff) until every held file is released, the
   * vault is closed, or timeout (ms) ends it (timedOut: true).
   */
  hunt(options?: { once?: boolean; timeout?: number }): Promise<HuntResult>;
  /** Examines the remote without writing to it: what a sync would refuse, and why. */
  doctor(): Promise<Finding[]>;
  status(): Promise<VaultStatus>;
  /**
   * Calls fn with the events of topic; returns the function that stops it (not a Promise).
   * "file": created, changed, deleted, held, released. "held": held, released and held-count.
   * "status": every event that is not a file event (held-count, hunt-found, sync-*).
   */
  on(topic: "file" | "held" | "status", fn: (e: VaultEvent) => void): () => void;
  /**
   * Joins a LiveSync P2P room (the plugin's P2P mode) and serves this vault's replica to the
   * peers there, in the plugin's plaintext local form, over the host's RTCPeerConnection and
   * WebSocket. Only in livesync-p2p.wasm (absent from the other builds).
   */
  p2p?(options: P2POptions): Promise<P2PPeer>;
  close(): Promise<void>;
}

export interface Livesync {
  open(options: OpenOptions): Promise<Vault>;
  codes: Record<ErrorCode, ErrorCode>;
  /**
   * Deletes the IndexedDB database of a replica (default "livesync-go"); rejects with code "busy"
   * while a vault (in any tab) has it open.
   */
  deleteStorage(name?: string): Promise<void>;
  /** Key derivation runs in crypto.subtle. */
  webCrypto: boolean;
  /** Closes every vault and ends the module. */
  exit(): Promise<void>;
}

/** Loads livesync.wasm (default: next to index.mjs) and returns its API. */
export function load(options?: { wasm?: string | URL | ArrayBuffer | ArrayBufferView | WebAssembly.Module }): Promise<Livesync>;
