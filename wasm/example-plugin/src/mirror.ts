// Mirror keeps two file trees equal: the engine's vault (the local
// replica the engine syncs with the remote) and the host's files (the
// Obsidian vault on disk, or any stand-in). It depends only on the small
// interfaces below, so it runs in a plain page as well as in the plugin.
//
// Echo loops: every write the mirror makes on one side comes back as an
// event of that side. The mirror remembers, per path, a digest of the
// content both sides hold (synced); an event whose side holds exactly
// that content, or a deletion of a path both sides already lack, is an
// echo and does nothing. All work runs on one queue, one step at a time,
// and each step reads the current content rather than trusting the
// event, so bursts of events settle to the last state.
//
// Conflicts are settled simply: a host file changed since it was last
// synced is the newest edit and wins over the engine's version (it is
// written to the engine, which syncs it as a new revision); when neither
// side was synced yet (the first run), the newer mtime wins. The real
// plugin merges conflicting revisions; this example does not.
import type { FileInfo, Vault, VaultEvent } from "livesync-go-wasm";

/** The part of the engine's vault the mirror uses. */
export type EngineVault = Pick<Vault, "list" | "read" | "write" | "delete" | "on">;

/** A file of the host. */
export interface HostFile {
  path: string;
  /** Milliseconds since the epoch. */
  mtime: number;
  size: number;
}

/** A change the host reports (made by the user, or an echo of the mirror's own write). */
export type HostChange =
  | { kind: "created" | "modified" | "deleted"; path: string }
  | { kind: "renamed"; path: string; oldPath: string };

/** The host's files: Obsidian's vault in the plugin, a stand-in in tests. */
export interface HostFiles {
  list(): Promise<HostFile[]>;
  /** The file's bytes, or null when there is no such file. */
  read(path: string): Promise<Uint8Array | null>;
  stat(path: string): Promise<HostFile | null>;
  /** Creates or replaces the file (and its parent folders). */
  write(path: string, data: Uint8Array, mtime: number): Promise<void>;
  /** Deletes the file; nothing when there is none. */
  remove(path: string): Promise<void>;
  /** Calls fn with every change; returns the function that stops it. */
  watch(fn: (change: HostChange) => void): () => void;
}

export interface MirrorOptions {
  /** Paths the mirror leaves alone on both sides (e.g. the config folder). */
  ignore?: (path: string) => boolean;
  /** A step that failed; the mirror goes on with the next one. */
  onError?: (err: unknown, path: string) => void;
}

/** What the mirror did, for a status line and for tests. */
export interface MirrorCounts {
  /** Files written to / deleted from the host. */
  hostWrites: number;
  hostDeletes: number;
  /** Files written to / deleted from the engine's vault. */
  engineWrites: number;
  engineDeletes: number;
}

export class Mirror {
  readonly counts: MirrorCounts = { hostWrites: 0, hostDeletes: 0, engineWrites: 0, engineDeletes: 0 };
  private readonly synced = new Map<string, string>();
  private queue: Promise<void> = Promise.resolve();
  private offs: Array<() => void> = [];
  private stopped = false;

  constructor(
    private readonly engine: EngineVault,
    private readonly host: HostFiles,
    private readonly options: MirrorOptions = {},
  ) {}

  /**
   * Starts listening to both sides and brings them level: files only one
   * side has are copied to the other, files both have with different
   * contents are settled by mtime, and files the engine knows as deleted
   * are deleted on the host unless the host's copy is newer. Resolves
   * when that first pass is done.
   */
  async start(): Promise<void> {
    this.offs.push(this.engine.on("file", (e) => this.onEngineEvent(e)));
    this.offs.push(this.host.watch((c) => this.onHostChange(c)));
    await this.enqueue("", () => this.reconcile());
  }

  /** Stops listening; resolves when the step under way has ended. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const off of this.offs.splice(0)) {
      off();
    }
    await this.idle();
  }

  /** Resolves once every step queued so far has run. */
  async idle(): Promise<void> {
    let q: Promise<void>;
    do {
      q = this.queue;
      await q;
    } while (q !== this.queue);
  }

  private ignored(path: string): boolean {
    return this.options.ignore?.(path) ?? false;
  }

  private enqueue(path: string, step: () => Promise<void>): Promise<void> {
    const run = async () => {
      if (this.stopped) {
        return;
      }
      try {
        await step();
      } catch (err) {
        this.options.onError?.(err, path);
      }
    };
    this.queue = this.queue.then(run);
    return this.queue;
  }

  private onEngineEvent(e: VaultEvent): void {
    const path = e.path;
    if (!path || this.ignored(path)) {
      return;
    }
    switch (e.kind) {
      case "created":
      case "changed":
      case "released":
        void this.enqueue(path, () => this.engineChanged(path));
        break;
      case "deleted":
        void this.enqueue(path, () => this.engineDeleted(path));
        break;
      // "held": the file cannot be read yet; "released" follows.
    }
  }

  private onHostChange(c: HostChange): void {
    if (c.kind === "renamed" && !this.ignored(c.oldPath)) {
      const old = c.oldPath;
      void this.enqueue(old, () => this.hostDeleted(old));
    }
    if (this.ignored(c.path)) {
      return;
    }
    const path = c.path;
    if (c.kind === "deleted") {
      void this.enqueue(path, () => this.hostDeleted(path));
    } else {
      void this.enqueue(path, () => this.hostChanged(path));
    }
  }

  // engineChanged copies the engine's file to the host, unless the host
  // already has it or has an unsynced edit of its own (which wins).
  private async engineChanged(path: string): Promise<void> {
    const data = await this.engine.read(path);
    const digest = await digestOf(data);
    const hostData = await this.host.read(path);
    const hostDigest = hostData && (await digestOf(hostData));
    if (hostDigest === digest) {
      this.synced.set(path, digest);
      return;
    }
    if (hostData && hostDigest !== this.synced.get(path)) {
      await this.toEngine(path, hostData, hostDigest!);
      return;
    }
    const info = await this.engineInfo(path);
    await this.toHost(path, data, digest, info?.mtime ?? Date.now());
  }

  // engineDeleted deletes the host's file, unless it has an unsynced
  // edit (which is written back to the engine: the edit wins).
  private async engineDeleted(path: string): Promise<void> {
    const hostData = await this.host.read(path);
    if (!hostData) {
      this.synced.delete(path);
      return;
    }
    const hostDigest = await digestOf(hostData);
    if (this.synced.get(path) !== hostDigest) {
      await this.toEngine(path, hostData, hostDigest);
      return;
    }
    this.synced.delete(path);
    await this.host.remove(path);
    this.counts.hostDeletes++;
  }

  // hostChanged writes the host's file to the engine unless the engine
  // has that content already (an echo of the mirror's own write).
  private async hostChanged(path: string): Promise<void> {
    const data = await this.host.read(path);
    if (!data) {
      return; // deleted since; its own event follows
    }
    const digest = await digestOf(data);
    if (this.synced.get(path) === digest) {
      return;
    }
    await this.toEngine(path, data, digest);
  }

  // hostDeleted deletes the file from the engine when it was synced: a
  // path the mirror never synced, or already deleted, is an echo.
  private async hostDeleted(path: string): Promise<void> {
    if (!this.synced.has(path) || (await this.host.stat(path))) {
      return;
    }
    this.synced.delete(path);
    try {
      await this.engine.delete(path);
      this.counts.engineDeletes++;
    } catch (err) {
      if ((err as { code?: string }).code !== "not_found") {
        throw err;
      }
    }
  }

  private async toHost(path: string, data: Uint8Array, digest: string, mtime: number): Promise<void> {
    this.synced.set(path, digest);
    await this.host.write(path, data, mtime);
    this.counts.hostWrites++;
  }

  private async toEngine(path: string, data: Uint8Array, digest: string): Promise<void> {
    const stat = await this.host.stat(path);
    this.synced.set(path, digest);
    await this.engine.write(path, data, stat ? { mtime: stat.mtime } : undefined);
    this.counts.engineWrites++;
  }

  private async engineInfo(path: string): Promise<FileInfo | undefined> {
    const files = await this.engine.list(path, { deleted: true });
    return files.find((f) => f.path === path);
  }

  // reconcile is the first pass of start().
  private async reconcile(): Promise<void> {
    const [engineFiles, hostFiles] = await Promise.all([this.engine.list("", { deleted: true }), this.host.list()]);
    const onHost = new Map(hostFiles.filter((f) => !this.ignored(f.path)).map((f) => [f.path, f]));
    for (const f of engineFiles) {
      if (this.ignored(f.path)) {
        continue;
      }
      const h = onHost.get(f.path);
      onHost.delete(f.path);
      try {
        await this.reconcileOne(f, h);
      } catch (err) {
        this.options.onError?.(err, f.path);
      }
    }
    for (const h of onHost.values()) {
      try {
        const data = await this.host.read(h.path);
        if (data) {
          await this.toEngine(h.path, data, await digestOf(data));
        }
      } catch (err) {
        this.options.onError?.(err, h.path);
      }
    }
  }

  private async reconcileOne(f: FileInfo, h: HostFile | undefined): Promise<void> {
    if (f.held) {
      return; // "released" brings it
    }
    if (f.deleted) {
      if (h && h.mtime <= f.mtime) {
        await this.host.remove(f.path);
        this.counts.hostDeletes++;
      } else if (h) {
        await this.hostChanged(f.path);
      }
      return;
    }
    const data = await this.engine.read(f.path);
    const digest = await digestOf(data);
    const hostData = h ? await this.host.read(f.path) : null;
    if (!hostData) {
      await this.toHost(f.path, data, digest, f.mtime);
      return;
    }
    const hostDigest = await digestOf(hostData);
    if (hostDigest === digest) {
      this.synced.set(f.path, digest);
    } else if (h!.mtime > f.mtime) {
      await this.toEngine(f.path, hostData, hostDigest);
    } else {
      await this.toHost(f.path, data, digest, f.mtime);
    }
  }
}

// digestOf is the SHA-256 of data in hex.
async function digestOf(data: Uint8Array): Promise<string> {
  const d = new Uint8Array(await crypto.subtle.digest("SHA-256", data as Uint8Array<ArrayBuffer>));
  let s = "";
  for (const b of d) {
    s += b.toString(16).padStart(2, "0");
  }
  return s;
}
