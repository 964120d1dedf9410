/**
 * The `runway` command line, run in the `runway` process itself (bin/runway.mjs registers tsx and
 * imports it) so signals reach the node. Usage is in cli-help.ts, failures and exit codes in
 * cli-errors.ts, the commands that run a node (`dev`, `node`) in cli-node.ts. A command line is
 * checked whole before connecting: `--help` needs no server.
 */
import { parseArgs } from "node:util";
import { connect, nkeyAuthenticator, type NatsConnection } from "@nats-io/transport-node";
import { machineDiagrams } from "../machines/index.js";
import { RunwayClient } from "./client.js";
import { jsonFile, jsonObjectFlag, positiveInt } from "./cli-args.js";
import { common, connection, connectionTarget, tenantId, type ConnectionFlags } from "./cli-connection.js";
import { answered, connectFailure, describeFailure, UsageError, type Done } from "./cli-errors.js";
import { commandHelp, commandUsage, overview } from "./cli-help.js";
import { devCommand, nodeCommand } from "./cli-node.js";
import { runCommand, RUN_OPTIONS } from "./cli-runs.js";
import { toolsCommand } from "./cli-tools.js";
import { schedulesCommand, SCHEDULES_OPTIONS } from "./cli-schedules.js";
import { modelsCommand } from "./cli-models.js";
import { approvalsCommand, APPROVALS_OPTIONS } from "./cli-approvals.js";
import { agentsCommand, AGENTS_OPTIONS } from "./cli-agents.js";
import { keysCommand, KEYS_OPTIONS } from "./cli-keys.js";
import { runCredsCommand } from "./creds/index.js";

const print = (value: unknown): void => void process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);

async function withClient<T>(values: ConnectionFlags & { tenant?: string }, body: (client: RunwayClient, nc: NatsConnection) => Promise<T>): Promise<T> {
  const tenant = tenantId(values.tenant ?? "demo", "--tenant");
  let nc: NatsConnection;
  const { nkeySeed, ...plain } = connection(values);
  try {
    nc = await connect({ ...plain, ...(nkeySeed ? { authenticator: nkeyAuthenticator(new TextEncoder().encode(nkeySeed)) } : {}) });
  } catch (err) {
    throw connectFailure(err, values.servers ?? "", values.user, values.nkey);
  }
  try {
    return await body(new RunwayClient(nc, tenant), nc);
  } finally {
    await nc.close();
  }
}

/** Checks `runway tenant <sub> …` and answers what it does once connected. */
function tenantCommand(sub: string | undefined, rest: string[]): { values: ConnectionFlags & { tenant?: string }; act: (c: RunwayClient) => Promise<Done> } {
  const { values, positionals } = parseArgs({
    args: rest,
    allowPositionals: true,
    options: { ...common, settings: { type: "string" }, reason: { type: "string" } },
  });
  if (sub !== "create" && sub !== "get" && sub !== "put" && sub !== "kill" && sub !== "drain" && sub !== "resume")
    throw new UsageError(
      sub ? `unknown subcommand: tenant ${sub} (create|get|put|kill|drain|resume)` : "which one? tenant create|get|put|kill|drain|resume",
      "tenant",
    );
  if (positionals[0] === undefined) throw new UsageError(`tenant ${sub} <id>: which tenant? (missing <id>)`, "tenant");
  const id = tenantId(positionals[0], "tenant id", "tenant");
  const settings = values.settings === undefined ? undefined : jsonObjectFlag("tenant", "--settings", values.settings);
  if (sub === "create") return { values, act: async (c) => answered("tenant create", await c.createTenant(id, settings)) };
  if (sub === "get") return { values: { ...values, tenant: id }, act: async (c) => answered("tenant get", await c.getTenant()) };
  if (sub === "put") {
    if (!settings) throw new UsageError("tenant put <id> --settings JSON: which settings?", "tenant");
    return { values: { ...values, tenant: id }, act: async (c) => answered("tenant put", await c.putTenant(settings)) };
  }
  return { values, act: async (c) => answered(`tenant ${sub}`, await c.setTenantState(id, sub, values.reason)) };
}

/** Checks `runway def <sub> …` and answers what it does once connected. */
function defCommand(sub: string | undefined, positionals: string[], values: { draft?: boolean; version?: string }): (c: RunwayClient) => Promise<Done> {
  const name = positionals[0];
  if (sub === "put") {
    if (!name) throw new UsageError("def put <file.json>: which file? (missing <file.json>)", "def");
    const definition = jsonFile("def", name);
    return async (c) => answered("def put", await c.putDefinition(definition, !values.draft));
  }
  if (sub === "get") {
    if (!name) throw new UsageError("def get <name>: which definition? (missing <name>)", "def");
    const version = positiveInt("def", "--version", values.version);
    return async (c) => answered("def get", await c.getDefinition(name, version));
  }
  if (sub === "list") return async (c) => answered("def list", await c.listDefinitions());
  if (sub === "disable" || sub === "enable") {
    if (!name) throw new UsageError(`def ${sub} <name>: which definition? (missing <name>)`, "def");
    return async (c) => answered(`def ${sub}`, await c.setDefinitionDisabled(name, sub === "disable"));
  }
  throw new UsageError(sub ? `unknown subcommand: def ${sub} (put|get|list|disable|enable)` : "which one? def put|get|list|disable|enable", "def");
}

/** Prints what a command did; a failed answer also gets one line on stderr, and the exit code 1. */
function finish(command: string, sub: string | undefined, done: Done): void {
  if (done.print !== undefined) print(done.print);
  if (!done.failed) return;
  process.exitCode = 1;
  const answer = done.print as { outcome?: unknown; reason?: unknown } | undefined;
  if (typeof answer?.outcome === "string")
    process.stderr.write(`runway: ${command}${sub ? ` ${sub}` : ""}: ${answer.outcome}${typeof answer.reason === "string" ? `: ${answer.reason}` : ""}\n`);
}

/** The dispatch: one short case per command, read best as one table rather than split. */
async function main(argv: string[]): Promise<void> {
  const [command, sub, ...rest] = argv;
  if (command === undefined) throw new UsageError("no command");
  if (command === "help" || command === "--help" || command === "-h") {
    if (sub === undefined || command !== "help") return void process.stdout.write(`${overview()}\n`);
    if (sub === "--help" || sub === "-h") return void process.stdout.write(`${commandUsage("help")}\n`);
    if (!commandHelp(sub)) throw new UsageError(`unknown command: ${sub}`);
    return void process.stdout.write(`${commandUsage(sub)}\n`);
  }
  if (!commandHelp(command)) throw new UsageError(`unknown command: ${command}`);
  // Before anything is parsed or connected: the usage needs no server.
  if (argv.includes("--help") || argv.includes("-h")) return void process.stdout.write(`${commandUsage(command)}\n`);
  const args = [sub, ...rest].filter((x): x is string => x !== undefined);
  switch (command) {
    case "machines":
      return void process.stdout.write(machineDiagrams());
    case "creds":
      process.exitCode = await runCredsCommand(args);
      return;
    case "dev":
      return devCommand(args);
    case "node":
      return nodeCommand(args);
    case "tenant": {
      const { values, act } = tenantCommand(sub, rest);
      return finish(command, sub, await withClient(values, act));
    }
    case "def": {
      const { values, positionals } = parseArgs({
        args: rest,
        allowPositionals: true,
        options: { ...common, draft: { type: "boolean", default: false }, version: { type: "string" } },
      });
      const act = defCommand(sub, positionals, values);
      return finish(command, sub, await withClient(values, act));
    }
    case "run": {
      const { values, positionals } = parseArgs({ args: rest, allowPositionals: true, options: { ...common, ...RUN_OPTIONS } });
      const tenant = tenantId(values.tenant ?? "demo", "--tenant", "run");
      const act = runCommand(tenant, sub, positionals, values);
      return finish(command, sub, await withClient(values, act));
    }
    case "approvals": {
      const { values, positionals } = parseArgs({ args: rest, allowPositionals: true, options: { ...common, ...APPROVALS_OPTIONS } });
      const act = approvalsCommand(sub, positionals[0], values);
      return finish(command, sub, await withClient(values, act));
    }
    case "tools": {
      const { values, positionals } = parseArgs({
        args: rest,
        allowPositionals: true,
        options: { ...common, server: { type: "string" }, args: { type: "string" }, "timeout-ms": { type: "string" } },
      });
      const act = toolsCommand(sub, positionals, values);
      return finish(command, sub, await withClient(values, act));
    }
    case "schedules": {
      const { values, positionals } = parseArgs({ args: rest, allowPositionals: true, options: { ...common, ...SCHEDULES_OPTIONS } });
      const act = schedulesCommand(sub, positionals, values);
      return finish(command, sub, await withClient(values, act));
    }
    case "agents": {
      const { values, positionals } = parseArgs({ args: rest, allowPositionals: true, options: { ...common, ...AGENTS_OPTIONS } });
      const act = agentsCommand(sub, positionals[0], values);
      return finish(command, sub, await withClient(values, act));
    }
    case "keys": {
      const { values, positionals } = parseArgs({ args: rest, allowPositionals: true, options: { ...common, ...KEYS_OPTIONS } });
      const act = keysCommand(sub, positionals[0], values);
      return finish(command, sub, await withClient(values, act));
    }
    case "models": {
      const { values, positionals } = parseArgs({ args: rest, allowPositionals: true, options: { ...common, "api-key-env": { type: "string" } } });
      const act = modelsCommand(sub, positionals, values, process.env);
      return finish(command, sub, await withClient(values, act));
    }
    case "ops": {
      const { values } = parseArgs({ args: rest, options: { ...common, limit: { type: "string" } } });
      if (sub !== "dead-letters") throw new UsageError(sub ? `unknown subcommand: ops ${sub} (dead-letters)` : "which one? ops dead-letters", "ops");
      const limit = positiveInt("ops", "--limit", values.limit);
      return finish(command, sub, await withClient(values, async (c) => answered("ops dead-letters", await c.deadLetters(limit))));
    }
  }
}

const argv = process.argv.slice(2);
try {
  await main(argv);
} catch (err) {
  const { line, code } = describeFailure(err, { command: argv[0] && commandHelp(argv[0]) ? argv[0] : undefined, servers: connectionTarget() });
  process.stderr.write(`runway: ${line}\n`);
  if (process.env.RUNWAY_DEBUG) process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(code);
}
