// ObsidianFiles is the mirror's HostFiles over Obsidian's vault.
//
// It writes through the Vault API (createBinary, modifyBinary, delete)
// rather than the raw adapter, so that Obsidian's file cache, open
// editors and the metadata cache follow at once, on desktop and mobile
// alike (a raw adapter write is only noticed when the desktop's file
// watcher reports it). Its own writes come back as vault events; the
// mirror recognises them as echoes.
import { App, EventRef, TAbstractFile, TFile, TFolder, normalizePath } from "obsidian";
import type { HostChange, HostFile, HostFiles } from "./mirror";

export class ObsidianFiles implements HostFiles {
  constructor(private readonly app: App) {}

  async list(): Promise<HostFile[]> {
    return this.app.vault.getFiles().map(info);
  }

  async read(path: string): Promise<Uint8Array | null> {
    const f = this.app.vault.getFileByPath(normalizePath(path));
    return f ? new Uint8Array(await this.app.vault.readBinary(f)) : null;
  }

  async stat(path: string): Promise<HostFile | null> {
    const f = this.app.vault.getFileByPath(normalizePath(path));
    return f ? info(f) : null;
  }

  async write(path: string, data: Uint8Array, mtime: number): Promise<void> {
    const p = normalizePath(path);
    const buf = data.slice().buffer;
    const existing = this.app.vault.getAbstractFileByPath(p);
    if (existing instanceof TFile) {
      await this.app.vault.modifyBinary(existing, buf, { mtime });
      return;
    }
    if (existing instanceof TFolder) {
      throw new Error(`${p} is a folder on this device`);
    }
    await this.ensureFolder(p.split("/").slice(0, -1).join("/"));
    await this.app.vault.createBinary(p, buf, { mtime });
  }

  async remove(path: string): Promise<void> {
    const f = this.app.vault.getFileByPath(normalizePath(path));
    if (f) {
      // Into the trash the user chose in Obsidian's settings.
      await this.app.fileManager.trashFile(f);
    }
  }

  watch(fn: (change: HostChange) => void): () => void {
    const vault = this.app.vault;
    const file = (f: TAbstractFile) => f instanceof TFile;
    const refs: EventRef[] = [
      vault.on("create", (f) => file(f) && fn({ kind: "created", path: f.path })),
      vault.on("modify", (f) => file(f) && fn({ kind: "modified", path: f.path })),
      vault.on("delete", (f) => file(f) && fn({ kind: "deleted", path: f.path })),
      vault.on("rename", (f, oldPath) => file(f) && fn({ kind: "renamed", path: f.path, oldPath })),
    ];
    return () => refs.forEach((r) => vault.offref(r));
  }

  private async ensureFolder(dir: string): Promise<void> {
    if (dir === "" || this.app.vault.getFolderByPath(dir)) {
      return;
    }
    await this.ensureFolder(dir.split("/").slice(0, -1).join("/"));
    await this.app.vault.createFolder(dir);
  }
}

function info(f: TFile): HostFile {
  return { path: f.path, mtime: f.stat.mtime, size: f.stat.size };
}
