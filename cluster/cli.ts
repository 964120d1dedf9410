/**
 * The `runway` command line: `npx runway <command> …`, `./bin/runway.mjs <command> …` or
 * `npm run runway -- <command> …`, all of which run this module in the `runway` process itself
 * (bin/runway.mjs registers tsx and imports it), so signals reach the node.
 *
 *   runway dev                      NATS (embedded nats-server) + one node + a `demo` tenant
 *   runway node                     one node of a cluster
 *   runway tenant create <id>
 *   runway def put <file.json> [--draft]     runway def get <name> [--version N]     runway def list
 *   runway run start <definition> [--input JSON] [--key SOURCE:DELIVERY] [--lane batch] [--project P] [--priority 0-9]
 *   runway run get <id>   runway run list [--status S] [--cursor C]   runway run events <id> [--after ID]   runway run watch <id>
 *   runway run cancel <id> [--reason R]
 *   runway run trajectory <id>   runway run replay <id>
 *   runway run held [<id>]   runway run reconcile <id> --key K --decision done|retry|abandon [--result JSON]
 *   runway approvals ls|show|approve|reject|edit …
 *   runway tools servers put|get|ls|rm …   runway tools ls   runway tools call <server> <tool> [--args JSON]
 *   runway ops dead-letters [--limit N]
 */
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { createLogger, type Logger } from "../runtime/index.js";
import { machineDiagrams, TenantIdSchema } from "../machines/index.js";
import { ApiFault, RunwayClient } from "./client.js";
import { runCommand, RunsUsageError, RUN_OPTIONS } from "./cli-runs.js";
import { toolsCommand, ToolsUsageError, TOOLS_USAGE } from "./cli-tools.js";
import { approvalsCommand, ApprovalsUsageError, APPROVALS_USAGE } from "./cli-approvals.js";
import { startEmbeddedNats } from "./embedded-nats.js";
import { startRunwayNode } from "./runway-node.js";
import type { EnvSetting } from "./env-setting.js";
import { applyHelperThreads, describeHelpers, HELPER_THREADS } from "./helper-threads.js";
import { applyV8Inlining, applyV8Tiering, V8_INLINING, V8_TIERING } from "./v8-flags.js";
import { applyEventLoopSpin, EVENT_LOOP_SPIN } from "./event-loop-spin.js";

const USAGE = `usage: runway <command> [options]
  dev   [--handlers a.ts,b.ts] [--tenant demo] [--store DIR]     embedded nats-server + one node
  node  --name N [--servers URL,…] [--handlers a.ts,…] [--threads 2] [--replicas 1] [--lease-ttl-ms 10000] [--metrics-port P] [--ended-run-retention-ms 604800000]
  tenant create <id> [--settings JSON] | tenant get <id> | tenant put <id> --settings JSON | tenant kill|drain|resume <id> [--reason R]
  def put <file.json> [--draft] | def get <name> [--version N] | def list
  run start <definition> [--input JSON] [--key SOURCE:DELIVERY] [--lane interactive|batch|migration] [--source cli] [--project P] [--priority 0-9]
  run get <id> | run list [--status S] [--limit N] [--cursor C] | run events <id> [--after ID] [--limit N]
  run watch <id> | run cancel <id> [--reason TEXT]
  run signal <id> <name> [--data JSON]                          a signal for the run's wait nodes; exit 1 unless delivered
  run held [<id>]                                               steps held for reconciliation (of one run), oldest first
  run trajectory <id>                                           its steps, tool calls and outcome as JSON lines
  run replay <id> [--wait-ms 30000]                             re-executes it with every tool call answered from its receipts; exit 1 unless identical
  run reconcile <id> --key K --decision done|retry|abandon [--result JSON] [--by NAME]
${TOOLS_USAGE}
${APPROVALS_USAGE}
  ops dead-letters [--limit N]                                  the newest dead letters first (default 50, at most 500)
  machines                                                      the production state machines as Mermaid diagrams; needs no server
  help | --help | -h
common: --servers URL,… (env RUNWAY_SERVERS, default nats://127.0.0.1:4222)  --user U --pass P  --tenant T (env RUNWAY_TENANT, default demo)
node and dev drain on SIGTERM or SIGINT, and when the npm that started them is gone`;

class UsageError extends Error {}

const common = {
  servers: { type: "string" as const, default: process.env.RUNWAY_SERVERS ?? "nats://127.0.0.1:4222" },
  user: { type: "string" as const },
  pass: { type: "string" as const },
  tenant: { type: "string" as const, default: process.env.RUNWAY_TENANT ?? "demo" },
};

function connection(values: { servers?: string; user?: string; pass?: string }) {
  return { servers: (values.servers ?? "").split(","), ...(values.user ? { user: values.user, pass: values.pass ?? "" } : {}) };
}

/** A tenant id by the API's own rule, refused here before anything is sent or started. */
function tenantId(value: string, what: string): string {
  const parsed = TenantIdSchema.safeParse(value);
  if (!parsed.success) throw new UsageError(`${what} ${JSON.stringify(value)}: ${parsed.error.issues.map((i) => i.message).join("; ")}`);
  return parsed.data;
}

const print = (value: unknown): void => void process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);

function defaultHandlers(): string[] {
  return [new URL("./demo/handlers.ts", import.meta.url).pathname];
}

/** A setting of the environment (`RUNWAY_V8_TIERING`, `RUNWAY_HELPER_THREADS`, `RUNWAY_EVENT_LOOP_SPIN`), checked before a node starts. */
function settingOf<T extends string>(setting: EnvSetting<T>): T {
  const value = setting.of(process.env);
  if (!value) throw new UsageError(setting.refusal(process.env));
  return value;
}

async function dev(argv: string[]): Promise<void> {
  const { values } = parseArgs({ args: argv, options: { handlers: { type: "string" }, tenant: common.tenant, store: { type: "string" } } });
  const tenant = tenantId(values.tenant!, "--tenant");
  const store = values.store ?? mkdtempSync(join(tmpdir(), "runway-dev-"));
  const tiering = settingOf(V8_TIERING);
  // Before any code runs hot: every compile after it is within the budget.
  applyV8Inlining(settingOf(V8_INLINING));
  applyEventLoopSpin(settingOf(EVENT_LOOP_SPIN));
  // Before the node starts its pool: the pool's threads keep the event loop's priority.
  applyHelperThreads(settingOf(HELPER_THREADS));
  const logger = createLogger("dev");
  const nats = await startEmbeddedNats(store);
  const node = await startRunwayNode({
    connection: { servers: [nats.url] },
    name: "dev",
    handlers: values.handlers ? values.handlers.split(",") : defaultHandlers(),
    logger,
  });
  await node.tenants.create(tenant);
  applyV8Tiering(tiering);
  process.stdout.write(`runway dev: NATS ${nats.url} (store ${store}); node "dev" serving; tenant "${tenant}"\n  export RUNWAY_SERVERS=${nats.url}\n`);
  runUntilStopped(logger, async () => {
    try {
      await node.stop();
    } finally {
      await nats.stop();
    }
  });
}

async function node(argv: string[]): Promise<void> {
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
      "ended-run-retention-ms": { type: "string" },
    },
  });
  if (!values.name) throw new UsageError("node needs --name");
  const retention = values["ended-run-retention-ms"] === undefined ? undefined : Number(values["ended-run-retention-ms"]);
  if (retention !== undefined && !(Number.isInteger(retention) && retention >= 1_000))
    throw new UsageError("--ended-run-retention-ms: an integer of at least 1000");
  const tiering = settingOf(V8_TIERING);
  // Before any code runs hot: every compile after it is within the budget.
  const inlining = applyV8Inlining(settingOf(V8_INLINING));
  const spin = applyEventLoopSpin(settingOf(EVENT_LOOP_SPIN));
  // Before the node starts its pool: the pool's threads keep the event loop's priority.
  const helpers = applyHelperThreads(settingOf(HELPER_THREADS));
  const logger = createLogger(`node:${values.name}`);
  const started = await startRunwayNode({
    connection: connection(values),
    name: values.name,
    handlers: values.handlers ? values.handlers.split(",") : defaultHandlers(),
    threads: Number(values.threads),
    replicas: Number(values.replicas),
    leaseTtlMs: Number(values["lease-ttl-ms"]),
    ...(values["metrics-port"] ? { metricsPort: Number(values["metrics-port"]) } : {}),
    ...(retention !== undefined ? { endedRunRetentionMs: retention } : {}),
    logger,
  });
  // Once it serves: a start runs much code once, and compiling it sooner only slows the start.
  const v8 = applyV8Tiering(tiering);
  logger.info("node ready", {
    name: values.name,
    incarnation: started.node.incarnation,
    pid: process.pid,
    v8_tiering: v8,
    v8_inlining: inlining,
    helper_threads: describeHelpers(helpers),
    event_loop_spin: spin,
  });
  process.stdout.write(`READY ${values.name}\n`);
  runUntilStopped(logger, () => started.stop());
}

/**
 * How a long-running command (`node`, `dev`) ends: it drains (partitions handed back after
 * in-flight commands, liveness record deleted, connection drained), logs `stopped` and exits 0
 * on the first of SIGTERM, SIGINT or losing the npm that started it; later triggers are
 * ignored while it drains. A stop that throws exits 1.
 */
function runUntilStopped(logger: Logger, stop: () => Promise<void>): void {
  let stopping = false;
  const drain = (reason: string): void => {
    if (stopping) return;
    stopping = true;
    // An orphan's stdout and stderr may be pipes nobody reads any more: a write must not kill the drain.
    for (const stream of [process.stdout, process.stderr]) stream.on("error", () => undefined);
    logger.info("stopping", { reason });
    stop().then(
      () => {
        logger.info("stopped", { reason });
        process.exit(0);
      },
      (err: unknown) => {
        logger.error("stop failed", { reason, error: err instanceof Error ? err.message : String(err) });
        process.exit(1);
      },
    );
  };
  process.on("SIGTERM", () => drain("SIGTERM"));
  process.on("SIGINT", () => drain("SIGINT"));
  if (process.env.npm_lifecycle_event) watchNpm(() => drain("npm_gone"));
}

/** How often a process started by npm checks that npm is still there. */
const PARENT_CHECK_MS = 500;
const SHELLS = new Set(["sh", "dash", "bash", "zsh", "ksh", "ash", "busybox"]);

/**
 * Calls `gone` once npm, which started this process, is gone. npm forwards SIGTERM and SIGINT
 * to its script, but a SIGKILLed npm forwards nothing and its script would go on serving.
 * `npm run runway` execs the CLI, so npm is the parent: its death reparents this process
 * (`process.ppid` changes). `npx runway` runs it through `sh -c`, whose shell stays between
 * them: on Linux the shell's own parent is watched too (from /proc), and changes when npm dies.
 * Only under npm (`npm_lifecycle_event` set): a node started by a supervisor or by hand is not
 * tied to whoever started it.
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

async function withClient<T>(
  values: { servers?: string; user?: string; pass?: string; tenant?: string },
  body: (client: RunwayClient, nc: NatsConnection) => Promise<T>,
): Promise<T> {
  const tenant = tenantId(values.tenant ?? "demo", "--tenant");
  const nc = await connect(connection(values));
  try {
    return await body(new RunwayClient(nc, tenant), nc);
  } finally {
    await nc.close();
  }
}

async function main(): Promise<void> {
  const [command, sub, ...rest] = process.argv.slice(2);
  switch (command) {
    case "help":
    case "--help":
    case "-h":
      return void process.stdout.write(`${USAGE}\n`);
    case "machines":
      return void process.stdout.write(machineDiagrams());
    case "dev":
      return dev([sub, ...rest].filter((x): x is string => x !== undefined));
    case "node":
      return node([sub, ...rest].filter((x): x is string => x !== undefined));
    case "tenant": {
      const { values, positionals } = parseArgs({
        args: rest,
        allowPositionals: true,
        options: { ...common, settings: { type: "string" }, reason: { type: "string" } },
      });
      const id = positionals[0] === undefined ? undefined : tenantId(positionals[0], "tenant id");
      if (sub === "create" && id) return print(await withClient(values, (c) => c.createTenant(id, values.settings ? JSON.parse(values.settings) : undefined)));
      if ((sub === "kill" || sub === "drain" || sub === "resume") && id)
        return print(await withClient(values, (c) => c.setTenantState(id, sub, values.reason)));
      if (sub === "get" && id) return print(await withClient({ ...values, tenant: id }, (c) => c.getTenant()));
      if (sub === "put" && id && values.settings) return print(await withClient({ ...values, tenant: id }, (c) => c.putTenant(JSON.parse(values.settings!))));
      throw new UsageError("tenant create|get|put|kill|drain|resume <id>");
    }
    case "def": {
      const { values, positionals } = parseArgs({
        args: rest,
        allowPositionals: true,
        options: { ...common, draft: { type: "boolean", default: false }, version: { type: "string" } },
      });
      if (sub === "put" && positionals[0])
        return print(await withClient(values, (c) => c.putDefinition(JSON.parse(readFileSync(positionals[0]!, "utf8")), !values.draft)));
      if (sub === "get" && positionals[0])
        return print(await withClient(values, (c) => c.getDefinition(positionals[0]!, values.version ? Number(values.version) : undefined)));
      if (sub === "list") return print(await withClient(values, (c) => c.listDefinitions()));
      throw new UsageError("def put <file> | def get <name> | def list");
    }
    case "run": {
      const { values, positionals } = parseArgs({ args: rest, allowPositionals: true, options: { ...common, ...RUN_OPTIONS } });
      const tenant = tenantId(values.tenant ?? "demo", "--tenant");
      const done = await withClient(values, (c, nc) => runCommand(c, nc, tenant, sub, positionals, values)).catch((err: unknown) => {
        throw err instanceof RunsUsageError ? new UsageError(err.message) : err;
      });
      if (done.failed) process.exitCode = 1;
      if (done.print !== undefined) print(done.print);
      return;
    }
    case "approvals": {
      const { values, positionals } = parseArgs({
        args: rest,
        allowPositionals: true,
        options: {
          ...common,
          group: { type: "string" },
          run: { type: "string" },
          reason: { type: "string" },
          payload: { type: "string" },
          by: { type: "string" },
          limit: { type: "string" },
          cursor: { type: "string" },
        },
      });
      const done = await withClient(values, (c) => approvalsCommand(c, sub, positionals[0], values)).catch((err: unknown) => {
        throw err instanceof ApprovalsUsageError ? new UsageError(err.message) : err;
      });
      if (done.failed) process.exitCode = 1;
      return print(done.print);
    }
    case "tools": {
      const { values, positionals } = parseArgs({
        args: rest,
        allowPositionals: true,
        options: { ...common, server: { type: "string" }, args: { type: "string" }, "timeout-ms": { type: "string" } },
      });
      const done = await withClient(values, (c) => toolsCommand(c, sub, positionals, values)).catch((err: unknown) => {
        throw err instanceof ToolsUsageError ? new UsageError(err.message) : err;
      });
      if (done.failed) process.exitCode = 1;
      return print(done.print);
    }
    case "ops": {
      const { values } = parseArgs({ args: rest, options: { ...common, limit: { type: "string" } } });
      if (sub === "dead-letters") {
        const limit = values.limit === undefined ? undefined : Number(values.limit);
        if (limit !== undefined && !(Number.isInteger(limit) && limit > 0)) throw new UsageError(`--limit ${values.limit}: expected a positive integer`);
        return print(await withClient(values, (c) => c.deadLetters(limit)));
      }
      throw new UsageError("ops dead-letters [--limit N]");
    }
    default:
      throw new UsageError(command ? `unknown command: ${command}` : "no command");
  }
}

try {
  await main();
} catch (err) {
  // node:util parseArgs refuses an unknown or malformed option with a TypeError coded ERR_PARSE_ARGS_*.
  if (err instanceof UsageError || (err instanceof TypeError && String((err as { code?: unknown }).code).startsWith("ERR_PARSE_ARGS"))) {
    process.stderr.write(`runway: ${err.message}\n${USAGE}\n`);
    process.exit(2);
  }
  if (err instanceof ApiFault) {
    process.stderr.write(`runway: service error ${err.code}: ${err.message}\n`);
    process.exit(1);
  }
  throw err;
}
