// An example Obsidian plugin over the livesync-go engine built to
// WebAssembly: it opens a LiveSync vault (from a Setup URI, or from
// Self-hosted LiveSync's own settings), keeps its replica in IndexedDB,
// live-syncs it with the remote through Obsidian's requestUrl, mirrors
// its files to and from the Obsidian vault, and shows held files and the
// chunks they wait for in the status bar.
//
// The plugin folder holds main.js (this file bundled, with the loader and
// Go's wasm_exec.js), manifest.json and livesync.wasm, which is read
// from the plugin folder at start.
import { App, Notice, Plugin, PluginSettingTab, Setting, normalizePath, requestUrl } from "obsidian";
import { load, type LiveSync, type Livesync, type OpenOptions, type Vault, type VaultEvent } from "livesync-go-wasm";
import { Mirror } from "./mirror";
import { ObsidianFiles } from "./obsidian-files";
import { requestUrlFetch } from "./requesturl";

interface Settings {
  /** Where the vault's settings come from. */
  source: "setup-uri" | "livesync-plugin";
  setupURI: string;
  setupPassphrase: string;
  /** The vault's E2EE passphrase, when the settings do not hold it. */
  passphrase: string;
  /** How this device names itself to the remote. */
  device: string;
}

const DEFAULTS: Settings = { source: "setup-uri", setupURI: "", setupPassphrase: "", passphrase: "", device: "" };

export default class LivesyncGoExample extends Plugin {
  settings: Settings = { ...DEFAULTS };
  private livesync?: Livesync;
  private vault?: Vault;
  private live?: LiveSync;
  private mirror?: Mirror;
  private statusEl?: HTMLElement;
  private state = { phase: "stopped", held: 0, pendingChunks: 0, error: "" };
  // Restarts run one after the other (the settings' button may be
  // pressed while one is under way).
  private restarting: Promise<void> = Promise.resolve();

  async onload(): Promise<void> {
    this.settings = { ...DEFAULTS, ...((await this.loadData()) as Partial<Settings> | null) };
    this.statusEl = this.addStatusBarItem();
    this.render();
    this.addSettingTab(new SettingsTab(this.app, this));
    this.addCommand({ id: "restart-sync", name: "Restart sync", callback: () => void this.restart() });
    // Vault "create" events fire for every file while Obsidian loads;
    // the mirror starts once the layout is ready.
    this.app.workspace.onLayoutReady(() => void this.restart());
  }

  async onunload(): Promise<void> {
    await this.restarting;
    await this.stopSync();
    await this.livesync?.exit();
    this.livesync = undefined;
  }

  async saveSettings(): Promise<void> {
    await this.saveData(this.settings);
  }

  /** (Re)opens the vault with the current settings and starts syncing. */
  restart(): Promise<void> {
    this.restarting = this.restarting.then(() => this.start());
    return this.restarting;
  }

  private async start(): Promise<void> {
    await this.stopSync();
    try {
      const options = await this.openOptions();
      if (!options) {
        this.setState({ phase: "not configured" });
        return;
      }
      this.setState({ phase: "opening", error: "" });
      this.livesync ??= await load({ wasm: await this.readWasm() });
      const vault = await this.livesync.open(options);
      this.vault = vault;
      vault.on("held", (e) => this.onHeld(e));
      vault.on("status", (e) => this.onStatus(e));
      const status = await vault.status();
      this.setState({ held: status.held, pendingChunks: status.pendingChunks });
      this.mirror = new Mirror(vault, new ObsidianFiles(this.app), {
        ignore: (p) => p.startsWith(this.app.vault.configDir + "/") || p.split("/").some((s) => s.startsWith(".")),
        onError: (err, path) => console.warn(`livesync-go example: ${path}:`, err),
      });
      await this.mirror.start();
      this.live = await vault.live();
      this.setState({ phase: "live" });
      this.live.done.then(
        () => this.setState({ phase: "stopped" }),
        (err: Error) => this.fail(err),
      );
    } catch (err) {
      this.fail(err as Error);
    }
  }

  private async stopSync(): Promise<void> {
    const { live, mirror, vault } = this;
    this.live = this.mirror = this.vault = undefined;
    await live?.stop();
    await mirror?.stop();
    await vault?.close();
    this.setState({ phase: "stopped" });
  }

  private async openOptions(): Promise<OpenOptions | undefined> {
    const s = this.settings;
    const base: OpenOptions = {
      storage: { kind: "indexeddb", name: `livesync-go-example-${this.app.vault.getName()}` },
      device: s.device || undefined,
      passphrase: s.passphrase || undefined,
      host: { fetch: requestUrlFetch(requestUrl) },
    };
    if (s.source === "livesync-plugin") {
      const path = normalizePath(`${this.app.vault.configDir}/plugins/obsidian-livesync/data.json`);
      if (!(await this.app.vault.adapter.exists(path))) {
        throw new Error("Self-hosted LiveSync's settings were not found in this vault");
      }
      return { ...base, settings: JSON.parse(await this.app.vault.adapter.read(path)) };
    }
    if (!s.setupURI) {
      return undefined;
    }
    return { ...base, setupURI: s.setupURI, setupPassphrase: s.setupPassphrase };
  }

  private async readWasm(): Promise<ArrayBuffer> {
    return this.app.vault.adapter.readBinary(normalizePath(`${this.manifest.dir}/livesync.wasm`));
  }

  // onHeld follows the held files: "held-count" says how many there are
  // and how many distinct chunks they still wait for.
  private onHeld(e: VaultEvent): void {
    if (e.kind === "held-count") {
      this.setState({ held: e.held ?? 0, pendingChunks: e.pendingChunks ?? 0 });
    }
  }

  private onStatus(e: VaultEvent): void {
    if (e.kind === "sync-retrying") {
      this.setState({ error: e.error?.message ?? "retrying" });
    } else if (e.kind === "sync-written") {
      this.setState({ error: "" });
    }
  }

  private fail(err: Error): void {
    const code = (err as { code?: string }).code;
    this.setState({ phase: "failed", error: code ? `${code}: ${err.message}` : err.message });
    new Notice(`LiveSync (livesync-go): ${this.state.error}`);
  }

  private setState(s: Partial<typeof this.state>): void {
    Object.assign(this.state, s);
    this.render();
  }

  private render(): void {
    const { phase, held, pendingChunks, error } = this.state;
    const waiting = held ? `, ${held} held (${pendingChunks} chunks pending)` : "";
    this.statusEl?.setText(`LiveSync: ${phase}${waiting}`);
    this.statusEl?.setAttr("title", error || "livesync-go");
  }
}

class SettingsTab extends PluginSettingTab {
  constructor(
    app: App,
    private readonly plugin: LivesyncGoExample,
  ) {
    super(app, plugin);
  }

  display(): void {
    const { containerEl } = this;
    const s = this.plugin.settings;
    const save = async () => this.plugin.saveSettings();
    containerEl.empty();
    containerEl.createEl("p", {
      text: "Passphrases are kept in this plugin's data.json, unencrypted. Use a vault you can afford to expose.",
    });
    new Setting(containerEl)
      .setName("Settings from")
      .setDesc("A Setup URI, or the settings of Self-hosted LiveSync installed in this vault.")
      .addDropdown((d) =>
        d
          .addOptions({ "setup-uri": "Setup URI", "livesync-plugin": "Self-hosted LiveSync" })
          .setValue(s.source)
          .onChange(async (v) => {
            s.source = v as Settings["source"];
            await save();
          }),
      );
    const text = (name: string, desc: string, key: "setupURI" | "setupPassphrase" | "passphrase" | "device", secret = false) =>
      new Setting(containerEl)
        .setName(name)
        .setDesc(desc)
        .addText((t) => {
          if (secret) {
            t.inputEl.type = "password";
          }
          t.setValue(s[key]).onChange(async (v) => {
            s[key] = v.trim();
            await save();
          });
        });
    text("Setup URI", "obsidian://setuplivesync?settings=…", "setupURI");
    text("Setup URI passphrase", "The passphrase the Setup URI was made with.", "setupPassphrase", true);
    text("E2EE passphrase", "The vault's passphrase, if the settings do not hold it.", "passphrase", true);
    text("Device name", "How this device names itself to the remote.", "device");
    new Setting(containerEl).addButton((b) =>
      b
        .setButtonText("Apply and restart sync")
        .setCta()
        .onClick(() => void this.plugin.restart()),
    );
  }
}
