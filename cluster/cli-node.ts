/**
 * The commands that run a node in the `runway` process: `dev` (one node and an embedded
 * nats-server) and `node` (one node of a cluster), with how they stop (signals, or the npm that
 * started them going away).
 */
import { mkdtempSync, readFileSync } from "node:fs";
import { constants, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { createLogger, type Logger } from "../runtime/index.js";
import { isHttpUrl, tracesFromEnv, tracesUrlOf, type TracesConfig } from "../gateways/index.js";
import { jsonFile } from "./cli-args.js";
import { common, connection, tenantId } from "./cli-connection.js";
import { UsageError } from "./cli-errors.js";
import { startEmbeddedNats } from "./embedded-nats.js";
import { startRunwayNode } from "./runway-node.js";
import { devCredentials } from "./creds/index.js";
import type { EnvSetting } from "./env-setting.js";
import { applyHelperThreads, describeHelpers, HELPER_THREADS } from "./helper-threads.js";
import { applyEventLoopSpin, EVENT_LOOP_SPIN } from "./event-loop-spin.js";

function defaultHandlers(): string[] {
  return [new URL("./demo/handlers.ts", import.meta.url).pathname];
}

/** A TCP port flag: 0 (any free port) to 65535. */
function port(command: string, flag: string, value: string): number {
  const n = Number(value);
  if (!/^[0-9]{1,5}$/.test(value) || n > 65_535) throw new UsageError(`${flag}: a port, 0 to 65535`, command);
  return n;
}

/** A setting of the environment (`RUNWAY_V8_TIERING`, `RUNWAY_HELPER_THREADS`, `RUNWAY_EVENT_LOOP_SPIN`), checked before a node starts. */
function settingOf<T extends string>(setting: EnvSetting<T>): T {
  const value = setting.of(process.env);
  if (!value) throw new UsageError(setting.refusal(process.env));
  return value;
}

export async function devCommand(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      handlers: { type: "string" },
      tenant: common.tenant,
      store: { type: "string" },
      "http-port": { type: "string", default: "8080" },
      "otlp-endpoint": { type: "string" },
    },
  });
  const traces = tracesOf("dev", values["otlp-endpoint"]);
  const tenant = tenantId(values.tenant!, "--tenant", "dev");
  const httpPort = port("dev", "--http-port", values["http-port"]!);
  const store = values.store ?? mkdtempSync(join(tmpdir(), "runway-dev-"));
  applyEventLoopSpin(settingOf(EVENT_LOOP_SPIN));
  // Before the node starts its pool: the pool's threads keep the event loop's priority.
  applyHelperThreads(settingOf(HELPER_THREADS));
  const logger = createLogger("dev");
  const stopper = stopOnSignals(logger);
  const creds = devCredentials(store, store, tenant);
  const nats = await startEmbeddedNats(store, { include: creds.include, seed: creds.nodeSeed });
  const node = await startRunwayNode({
    connection: { servers: [nats.url], nkeySeed: creds.nodeSeed },
    name: "dev",
    handlers: values.handlers ? values.handlers.split(",") : defaultHandlers(),
    http: { port: httpPort },
    ...(traces ? { traces } : {}),
    credentialsDir: creds.dir,
    logger,
  });
  await node.tenants.create(tenant);
  const exports = { RUNWAY_SERVERS: nats.url, NATS_URL: nats.url, ...creds.env };
  process.stdout.write(
    [
      `runway dev: NATS ${nats.url} (store ${store}, credentials on); node "dev" serving; tenant "${tenant}"`,
      `  A2A agents at ${node.httpUrl}/a2a/${tenant}/<agent>`,
      `  console at ${node.httpUrl}/console/ (this machine: every tenant; a tenant's API key: that tenant)`,
      `  operator key (nats micro, nats kv, ops commands): ${creds.operatorKey}`,
      `  in another shell, to speak as tenant "${tenant}" (runway and nats CLIs):`,
      `  export ${Object.entries(exports)
        .map(([k, v]) => `${k}=${v}`)
        .join(" ")}`,
      "",
    ].join("\n"),
  );
  stopper.serve(async () => {
    try {
      await node.stop();
    } finally {
      await nats.stop();
    }
  });
}

/**
 * Tracing (docs/traces.md): `--otlp-endpoint URL` (an OTLP/HTTP base URL: spans go to
 * `URL/v1/traces`), else the OpenTelemetry variables; off when neither is set.
 */
function tracesOf(command: string, flag: string | undefined): TracesConfig | undefined {
  if (flag !== undefined) {
    if (!isHttpUrl(flag)) throw new UsageError(`--otlp-endpoint: an http(s) URL, not ${JSON.stringify(flag)}`, command);
    const env = tracesFromEnv(process.env).config;
    return { ...(env ?? {}), url: tracesUrlOf(flag, true) };
  }
  const read = tracesFromEnv(process.env);
  if (read.refusal) throw new UsageError(read.refusal, command);
  return read.config;
}

/** `--a2a-credentials FILE`: a JSON object of bearer tokens by `<tenant>/<auth name>` (docs/a2a.md#calling-remote-agents). */
function credentialsFile(path: string): Record<string, string> {
  const read = jsonFile("node", path);
  const out: Record<string, string> = {};
  if (typeof read !== "object" || read === null || Array.isArray(read)) throw new UsageError(`${path}: a JSON object of tokens by "<tenant>/<name>"`, "node");
  for (const [key, token] of Object.entries(read)) {
    if (!/^[^/\s]+\/[A-Za-z0-9_.-]{1,64}$/.test(key) || typeof token !== "string" || token === "")
      throw new UsageError(`${path}: ${JSON.stringify(key)} is not "<tenant>/<name>": "<token>"`, "node");
    out[key] = token;
  }
  return out;
}

export async function nodeCommand(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      ...common,
      name: { type: "string" },
      handlers: { type: "string" },
      threads: { type: "string", default: "2" },
      replicas: { type: "string", default: "1" },
      "lease-ttl-ms": { type: "string", default: "10000" },
      "metrics-port": { type: "string" },
      "http-port": { type: "string" },
      "http-host": { type: "string" },
      "ended-run-retention-ms": { type: "string" },
      "a2a-credentials": { type: "string", default: process.env.RUNWAY_A2A_CREDENTIALS },
      "otlp-endpoint": { type: "string" },
      "credentials-dir": { type: "string", default: process.env.RUNWAY_CREDENTIALS_DIR },
    },
  });
  const traces = tracesOf("node", values["otlp-endpoint"]);
  const httpPort = values["http-port"] === undefined ? undefined : port("node", "--http-port", values["http-port"]);
  const a2aCredentials = values["a2a-credentials"] ? credentialsFile(values["a2a-credentials"]) : undefined;
  if (!values.name) throw new UsageError("node needs --name", "node");
  const retention = values["ended-run-retention-ms"] === undefined ? undefined : Number(values["ended-run-retention-ms"]);
  if (retention !== undefined && !(Number.isInteger(retention) && retention >= 1_000))
    throw new UsageError("--ended-run-retention-ms: an integer of at least 1000", "node");
  const spin = applyEventLoopSpin(settingOf(EVENT_LOOP_SPIN));
  // Before the node starts its pool: the pool's threads keep the event loop's priority.
  const helpers = applyHelperThreads(settingOf(HELPER_THREADS));
  const logger = createLogger(`node:${values.name}`);
  const stopper = stopOnSignals(logger);
  const started = await startRunwayNode({
    connection: connection(values),
    name: values.name,
    handlers: values.handlers ? values.handlers.split(",") : defaultHandlers(),
    threads: Number(values.threads),
    replicas: Number(values.replicas),
    leaseTtlMs: Number(values["lease-ttl-ms"]),
    ...(values["metrics-port"] ? { metricsPort: Number(values["metrics-port"]) } : {}),
    ...(httpPort !== undefined ? { http: { port: httpPort, ...(values["http-host"] ? { host: values["http-host"] } : {}) } } : {}),
    ...(retention !== undefined ? { endedRunRetentionMs: retention } : {}),
    ...(a2aCredentials ? { a2a: { credentials: a2aCredentials } } : {}),
    ...(traces ? { traces } : {}),
    ...(values["credentials-dir"] ? { credentialsDir: values["credentials-dir"] } : {}),
    logger,
  });
  logger.info("node ready", {
    name: values.name,
    incarnation: started.node.incarnation,
    pid: process.pid,
    // V8's flags are node's, given on its command line (docs/tuning.md): a node never sets them itself.
    node_flags: process.execArgv.join(" ") || "none",
    helper_threads: describeHelpers(helpers),
    event_loop_spin: spin,
    traces: traces?.url ?? "off",
  });
  process.stdout.write(`READY ${values.name}\n`);
  if (started.httpUrl) process.stdout.write(`A2A agents at ${started.httpUrl}/a2a/<tenant>/<agent>\nconsole at ${started.httpUrl}/console/\n`);
  stopper.serve(() => started.stop());
}

/**
 * How a long-running command (`node`, `dev`) ends: it drains (partitions handed back after
 * in-flight commands, liveness record deleted, connection drained), logs `stopped` and exits 0
 * on the first of SIGTERM, SIGINT or losing the npm that started it; later triggers are
 * ignored while it drains. A stop that throws exits 1. Installed before the node starts, so a
 * signal during the start is not lost to the signal's default action: the node drains as soon
 * as it is up, and a second signal before then ends the process at once (128 + the signal).
 */
function stopOnSignals(logger: Logger): { serve(stop: () => Promise<void>): void } {
  let reason: string | undefined;
  let stop: (() => Promise<void>) | undefined;
  let draining = false;
  const drain = (): void => {
    if (draining || reason === undefined || stop === undefined) return;
    draining = true;
    const why = reason;
    stop().then(
      () => {
        logger.info("stopped", { reason: why });
        process.exit(0);
      },
      (err: unknown) => {
        logger.error("stop failed", { reason: why, error: err instanceof Error ? err.message : String(err) });
        process.exit(1);
      },
    );
  };
  const trigger = (why: string, signum?: number): void => {
    if (reason !== undefined) {
      if (stop === undefined && signum !== undefined) process.exit(128 + signum);
      return;
    }
    reason = why;
    // An orphan's stdout and stderr may be pipes nobody reads any more: a write must not kill the drain.
    for (const stream of [process.stdout, process.stderr]) stream.on("error", () => undefined);
    logger.info("stopping", { reason: why, ...(stop === undefined ? { started: false } : {}) });
    drain();
  };
  process.on("SIGTERM", () => trigger("SIGTERM", constants.signals.SIGTERM));
  process.on("SIGINT", () => trigger("SIGINT", constants.signals.SIGINT));
  if (process.env.npm_lifecycle_event) watchNpm(() => trigger("npm_gone"));
  return {
    serve(stopNode) {
      stop = stopNode;
      drain();
    },
  };
}

/** How often a process started by npm checks that npm is still there. */
const PARENT_CHECK_MS = 500;
const SHELLS = new Set(["sh", "dash", "bash", "zsh", "ksh", "ash", "busybox"]);

/**
 * Calls `gone` once npm, which started this process, is gone: a SIGKILLed npm forwards no signal and
 * its script would go on serving. Detected by reparenting (`process.ppid`), and under `npx`'s
 * `sh -c` by the shell's parent too (from /proc). Only under npm: a supervisor's node is not tied to
 * whoever started it.
 */
function watchNpm(gone: () => void): void {
  const parent = process.ppid;
  const viaShell = SHELLS.has(procField(parent, "comm") ?? "");
  const grandparent = viaShell ? parentOf(parent) : undefined;
  const timer = setInterval(() => {
    if (process.ppid === parent && (grandparent === undefined || parentOf(parent) === grandparent)) return;
    clearInterval(timer);
    gone();
  }, PARENT_CHECK_MS);
  timer.unref();
}

/** `/proc/<pid>/<file>`, trimmed; undefined off Linux or when the process is gone. */
function procField(pid: number, file: string): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/${file}`, "utf8").trim();
  } catch {
    return undefined;
  }
}

/** The parent of `pid` (field 4 of /proc/<pid>/stat, after the parenthesised name, which may hold spaces). */
function parentOf(pid: number): number | undefined {
  const stat = procField(pid, "stat");
  if (stat === undefined) return undefined;
  const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
  return Number.isInteger(ppid) ? ppid : undefined;
}
