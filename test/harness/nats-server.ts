// One real nats-server process with JetStream, on loopback ports chosen up front so that a
// restart (and a cluster's routes) can reuse them.
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync, writeSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect, type ConnectionOptions } from "@nats-io/transport-node";
import { jetstreamManager } from "@nats-io/jetstream";
import { continueProcess, registerProcess, registerTempDir, stopProcess, unregisterTempDir } from "./processes.js";
import { toolPaths } from "./tools.js";
import { errorText, waitFor } from "./wait.js";

export const RUNWAY_USER = { user: "runway", pass: "runway" } as const;
export const SYS_USER = { user: "sys", pass: "sys" } as const;
export const CLUSTER_NAME = "runway-test";

export interface ConnectOptions {
  servers: string[];
  user: string;
  pass: string;
}

export interface StartServerOptions {
  /** server_name; default a unique `s<N>`. */
  name?: string;
  /** Deadline for "accepts connections and JetStream answers" (default 20 s). */
  readyTimeoutMs?: number;
  /** Extra nats-server config appended verbatim (top level). */
  extraConfig?: string;
  /** jetstream block limits, nats-server syntax (e.g. "1GB"). */
  maxMemoryStore?: string;
  maxFileStore?: string;
  /** fsync every write (`sync_interval: always`), as the peer engines do by default. */
  syncAlways?: boolean;
  /** Run with -D (debug log lines in logPath). */
  debug?: boolean;
  /** Replaces the RUNWAY/SYS password accounts (then connectOptions() does not apply). */
  auth?: ServerAuth;
}

/** Accounts and users of the server's own (e.g. `runway creds`' auth.conf), and how the readiness check connects. */
export interface ServerAuth {
  /** nats-server config text holding `accounts` and `system_account`. */
  config: string;
  /** Credentials of a user of a JetStream-enabled account. */
  ready: Pick<ConnectionOptions, "user" | "pass" | "authenticator">;
}

export interface RestartOptions {
  readyTimeoutMs?: number;
}

export interface NatsServerHandle {
  readonly name: string;
  /** nats://127.0.0.1:PORT */
  readonly url: string;
  readonly port: number;
  /** HTTP monitoring (varz, jsz, healthz). */
  readonly monitorPort: number;
  readonly monitorUrl: string;
  /** PID of the current process; changes on restart(). */
  readonly pid: number;
  /** Every PID this handle has spawned, oldest first. */
  readonly pids: readonly number[];
  readonly dir: string;
  readonly storeDir: string;
  readonly configPath: string;
  readonly logPath: string;
  /** For connect() from @nats-io/transport-node, as the runway user. */
  connectOptions(): ConnectOptions;
  /** Same, as the system-account user. */
  sysConnectOptions(): ConnectOptions;
  /** SIGTERM, SIGKILL after timeoutMs (default 10 s); resolves once exited. */
  stop(opts?: { timeoutMs?: number }): Promise<void>;
  /** SIGKILL; resolves once exited. */
  kill(): Promise<void>;
  /** Start again with the same config, ports and store; resolves when ready. */
  restart(opts?: RestartOptions): Promise<void>;
  /** SIGSTOP: the process is frozen, sockets stay open, clients see timeouts. Resolves once
   *  every thread has stopped (the signal alone takes effect some milliseconds later). */
  pause(): Promise<void>;
  /** SIGCONT. */
  resume(): void;
  isRunning(): boolean;
  isPaused(): boolean;
  /** Last lines of the server log, for failure messages. */
  logTail(lines?: number): string;
  /** kill() and remove the temp dir. */
  dispose(): Promise<void>;
}

// ---- ports -------------------------------------------------------------------------------------

// Ports handed out by this process; the OS may offer a just-closed port again before the
// server that was told to use it has bound it.
const handedOut = new Set<number>();

export async function freePort(): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const port = await new Promise<number>((resolve, reject) => {
      const srv = createServer();
      srv.unref();
      srv.once("error", reject);
      srv.listen(0, "127.0.0.1", () => {
        const addr = srv.address();
        const p = typeof addr === "object" && addr ? addr.port : 0;
        srv.close(() => resolve(p));
      });
    });
    if (port > 0 && !handedOut.has(port)) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error("could not find a free loopback port");
}

// ---- config ------------------------------------------------------------------------------------

export interface ServerSpec {
  name: string;
  dir: string;
  port: number;
  monitorPort: number;
  /** `noAdvertise`: members do not tell clients each other's client URLs (a client stays on the URLs it was given, e.g. proxies). */
  cluster?: { port: number; routePorts: number[]; noAdvertise?: boolean };
  extraConfig?: string;
  maxMemoryStore?: string;
  maxFileStore?: string;
  syncAlways?: boolean;
  debug?: boolean;
  auth?: ServerAuth;
}

function renderConfig(spec: ServerSpec, storeDir: string): string {
  const q = JSON.stringify; // nats config accepts JSON-style quoted strings
  const lines = [
    `server_name: ${q(spec.name)}`,
    `listen: ${q(`127.0.0.1:${spec.port}`)}`,
    `http: ${q(`127.0.0.1:${spec.monitorPort}`)}`,
    `jetstream {`,
    `  store_dir: ${q(storeDir)}`,
    // explicit limits: the defaults (75% of RAM/disk) differ per machine and per node
    `  max_memory_store: ${spec.maxMemoryStore ?? "1GB"}`,
    `  max_file_store: ${spec.maxFileStore ?? "10GB"}`,
    ...(spec.syncAlways ? [`  sync_interval: always`] : []),
    `}`,
  ];
  if (spec.auth) lines.push(spec.auth.config);
  else
    lines.push(
      `accounts {`,
      `  RUNWAY {`,
      `    jetstream: enabled`,
      `    users: [ { user: ${q(RUNWAY_USER.user)}, password: ${q(RUNWAY_USER.pass)} } ]`,
      `  }`,
      `  SYS {`,
      `    users: [ { user: ${q(SYS_USER.user)}, password: ${q(SYS_USER.pass)} } ]`,
      `  }`,
      `}`,
      // lets `nats server report jetstream` and $SYS requests work with the sys user
      `system_account: SYS`,
    );
  if (spec.cluster) {
    lines.push(
      `cluster {`,
      `  name: ${q(CLUSTER_NAME)}`,
      `  listen: ${q(`127.0.0.1:${spec.cluster.port}`)}`,
      ...(spec.cluster.noAdvertise ? [`  no_advertise: true`] : []),
      `  routes: [`,
      ...spec.cluster.routePorts.map((p) => `    ${q(`nats-route://127.0.0.1:${p}`)}`),
      `  ]`,
      `}`,
    );
  }
  if (spec.extraConfig) lines.push(spec.extraConfig);
  return lines.join("\n") + "\n";
}

// ---- readiness ---------------------------------------------------------------------------------

/** Connects as the runway user (or `as`) and asks JetStream for account info; throws if not ready. */
export async function jetStreamAnswers(servers: string[], timeoutMs = 2000, as: ServerAuth["ready"] = RUNWAY_USER): Promise<true> {
  const nc = await connect({ servers, ...as, reconnect: false, timeout: timeoutMs });
  try {
    const jsm = await jetstreamManager(nc, { timeout: timeoutMs, checkAPI: false });
    await jsm.getAccountInfo();
    return true;
  } finally {
    await nc.close().catch(() => {});
  }
}

export async function monitorJson(monitorUrl: string, path: string, timeoutMs = 2000): Promise<{ status: number; body: unknown }> {
  const res = await fetch(`${monitorUrl}${path}`, { signal: AbortSignal.timeout(timeoutMs) });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // healthz errors may be plain text
  }
  return { status: res.status, body };
}

// ---- the process -------------------------------------------------------------------------------

export type Readiness = "jetstream" | "connect" | "cluster-member";

/** Shared by startServer and startCluster. */
export class ServerProcess implements NatsServerHandle {
  readonly name: string;
  readonly url: string;
  readonly port: number;
  readonly monitorPort: number;
  readonly monitorUrl: string;
  readonly dir: string;
  readonly storeDir: string;
  readonly configPath: string;
  readonly logPath: string;
  readonly pids: number[] = [];
  private child: ChildProcess | undefined;
  private exitedP: Promise<void> = Promise.resolve();
  private running = false;
  private paused = false;
  private starts = 0;

  constructor(
    private readonly binary: string,
    readonly spec: ServerSpec,
    private readonly readiness: Readiness,
    private readonly readyTimeoutMs: number,
  ) {
    this.name = spec.name;
    this.port = spec.port;
    this.url = `nats://127.0.0.1:${spec.port}`;
    this.monitorPort = spec.monitorPort;
    this.monitorUrl = `http://127.0.0.1:${spec.monitorPort}`;
    this.dir = spec.dir;
    this.storeDir = join(spec.dir, "store");
    this.configPath = join(spec.dir, "nats-server.conf");
    this.logPath = join(spec.dir, "nats-server.log");
    mkdirSync(this.storeDir, { recursive: true });
    writeFileSync(this.configPath, renderConfig(spec, this.storeDir));
  }

  get pid(): number {
    const pid = this.child?.pid;
    if (pid === undefined) throw new Error(`${this.name}: not started`);
    return pid;
  }

  connectOptions(): ConnectOptions {
    return { servers: [this.url], ...RUNWAY_USER };
  }

  sysConnectOptions(): ConnectOptions {
    return { servers: [this.url], ...SYS_USER };
  }

  isRunning(): boolean {
    return this.running;
  }

  isPaused(): boolean {
    return this.running && this.paused;
  }

  logTail(lines = 30): string {
    try {
      return readFileSync(this.logPath, "utf8").trimEnd().split("\n").slice(-lines).join("\n");
    } catch {
      return "(no log)";
    }
  }

  /** Spawn the process; does not wait for readiness. */
  spawn(): void {
    if (this.running) throw new Error(`${this.name}: already running (pid ${this.child?.pid})`);
    this.starts++;
    const fd = openSync(this.logPath, "a");
    writeSync(fd, `--- harness: start #${this.starts} of ${this.name} at ${new Date().toISOString()} ---\n`);
    const args = ["-c", this.configPath];
    if (this.spec.debug) args.push("-D");
    let child: ChildProcess;
    try {
      // the log file is the child's stdout/stderr directly: nothing to pump, survives our crash
      child = spawn(this.binary, args, { stdio: ["ignore", fd, fd] });
    } finally {
      closeSync(fd);
    }
    if (child.pid === undefined) {
      child.on("error", () => {});
      throw new Error(`${this.name}: could not spawn ${this.binary}`);
    }
    this.child = child;
    this.pids.push(child.pid);
    this.running = true;
    this.paused = false;
    this.exitedP = new Promise<void>((resolve) => {
      const done = () => {
        if (this.child === child) {
          this.running = false;
          this.paused = false;
        }
        resolve();
      };
      child.once("exit", done);
      child.once("error", done);
    });
    registerProcess(child.pid, `nats-server ${this.name}`, this.exitedP);
  }

  /** Rejects as soon as the process exits, with the log tail. */
  private async exitedEarly(): Promise<never> {
    const child = this.child;
    await this.exitedP;
    throw new Error(
      `${this.name}: nats-server exited during startup (code ${child?.exitCode}, signal ${child?.signalCode}); log ${this.logPath}:\n${this.logTail()}`,
    );
  }

  async waitReady(readiness: Readiness = this.readiness, timeoutMs = this.readyTimeoutMs): Promise<void> {
    const check = async (): Promise<boolean> => {
      if (readiness === "connect") {
        const nc = await connect({ servers: [this.url], ...(this.spec.auth?.ready ?? RUNWAY_USER), reconnect: false, timeout: 1000 });
        await nc.close();
        return true;
      }
      await jetStreamAnswers([this.url], 1500, this.spec.auth?.ready);
      if (readiness === "cluster-member") {
        // healthz is only ok once this node has caught up with the meta group and its streams
        const h = await monitorJson(this.monitorUrl, "/healthz", 1500);
        if (h.status !== 200) throw new Error(`healthz ${h.status}: ${JSON.stringify(h.body)}`);
      }
      return true;
    };
    const early = this.exitedEarly();
    early.catch(() => {});
    try {
      await Promise.race([waitFor(check, { timeoutMs, intervalMs: 50, describe: `${this.name} (${this.url}) to be ready (${readiness})` }), early]);
    } catch (err) {
      if (String(errorText(err)).includes("exited during startup")) throw err;
      throw new Error(`${errorText(err)}\nlog ${this.logPath}:\n${this.logTail()}`, { cause: err });
    }
  }

  async stop({ timeoutMs = 10_000 }: { timeoutMs?: number } = {}): Promise<void> {
    if (!this.running || !this.child?.pid) return;
    const pid = this.child.pid;
    sendSignal(pid, "SIGTERM");
    // a stopped process would hold SIGTERM pending forever; SIGCONT is harmless otherwise
    continueProcess(pid);
    let timer: NodeJS.Timeout | undefined;
    const timedOut = await Promise.race([
      this.exitedP.then(() => false),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), timeoutMs))),
    ]);
    clearTimeout(timer);
    if (timedOut) {
      sendSignal(pid, "SIGKILL");
      await this.exitedP;
    }
  }

  async kill(): Promise<void> {
    if (!this.running || !this.child?.pid) return;
    sendSignal(this.child.pid, "SIGKILL");
    await this.exitedP;
  }

  async restart(opts: RestartOptions = {}): Promise<void> {
    if (this.running) await this.stop();
    this.spawn();
    await this.waitReady(this.readiness, opts.readyTimeoutMs ?? this.readyTimeoutMs);
  }

  async pause(): Promise<void> {
    if (this.running && this.child?.pid) this.paused = await stopProcess(this.child.pid);
  }

  resume(): void {
    if (this.running && this.child?.pid && continueProcess(this.child.pid)) this.paused = false;
  }

  async dispose(): Promise<void> {
    await this.kill();
    if (!process.env.RUNWAY_KEEP_TMP) rmSync(this.dir, { recursive: true, force: true });
    unregisterTempDir(this.dir);
  }

  /** The server could not bind a port someone else grabbed between freePort() and start. */
  portClash(): boolean {
    return /address already in use/i.test(this.logTail(50));
  }
}

function sendSignal(pid: number, sig: NodeJS.Signals): boolean {
  try {
    process.kill(pid, sig);
    return true;
  } catch {
    return false;
  }
}

export function makeTempDir(label: string): string {
  const dir = mkdtempSync(join(tmpdir(), `runway-nats-${label}-`));
  registerTempDir(dir);
  return dir;
}

let serial = 0;

/** Start one JetStream-enabled nats-server; resolves once JetStream answers. */
export async function startServer(opts: StartServerOptions = {}): Promise<NatsServerHandle> {
  const { natsServer } = await toolPaths();
  const name = opts.name ?? `s${++serial}`;
  const readyTimeoutMs = opts.readyTimeoutMs ?? 20_000;
  for (let attempt = 1; ; attempt++) {
    const dir = makeTempDir(name);
    const server = new ServerProcess(
      natsServer,
      {
        name,
        dir,
        port: await freePort(),
        monitorPort: await freePort(),
        extraConfig: opts.extraConfig,
        maxMemoryStore: opts.maxMemoryStore,
        maxFileStore: opts.maxFileStore,
        ...(opts.syncAlways ? { syncAlways: true } : {}),
        debug: opts.debug,
        ...(opts.auth ? { auth: opts.auth } : {}),
      },
      "jetstream",
      readyTimeoutMs,
    );
    server.spawn();
    try {
      await server.waitReady();
      return server;
    } catch (err) {
      const clash = server.portClash();
      await server.dispose();
      // another process took a port between freePort() and bind: pick new ports
      if (clash && attempt < 3) continue;
      throw err;
    }
  }
}

// ---- config reload -----------------------------------------------------------------------------

/**
 * Sets (or, with undefined, lifts) the RUNWAY account's JetStream file-storage quota on one
 * running server by rewriting its config and reloading it (SIGHUP); resolves once the server
 * has loaded the new config. A quota below what the server stores makes the streams it leads
 * refuse writes ("resource limits exceeded for account", 10002) until it is lifted; unlike the
 * server's own `max_file_store`, which nats-server does not let a reload decrease.
 */
export async function setAccountFileQuota(server: NatsServerHandle, quota: string | undefined, timeoutMs = 10_000): Promise<void> {
  const limited = /jetstream: \{ max_file: [^ ]+ \}/;
  const config = readFileSync(server.configPath, "utf8");
  const unlimited = config.replace(limited, "jetstream: enabled");
  if (!unlimited.includes("    jetstream: enabled")) throw new Error(`${server.name}: no RUNWAY account JetStream line in ${server.configPath}`);
  const next = quota === undefined ? unlimited : unlimited.replace("    jetstream: enabled", `    jetstream: { max_file: ${quota} }`);
  const loadTime = async () => ((await monitorJson(server.monitorUrl, "/varz", 1500)).body as { config_load_time?: string }).config_load_time;
  const before = await loadTime();
  writeFileSync(server.configPath, next);
  process.kill(server.pid, "SIGHUP");
  await waitFor(async () => (await loadTime()) !== before, { timeoutMs, intervalMs: 50, describe: `${server.name} to reload its config` });
}
