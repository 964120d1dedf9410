/**
 * `runway tools …`: the tenant's MCP servers and their tools, and a one-step tool run to try a server
 * before wiring it into a workflow (usage: cli-help.ts).
 */
import { createHash } from "node:crypto";
import type { ApiAnswer, RunwayClient } from "./client.js";
import { jsonFile, jsonObjectFlag } from "./cli-args.js";
import { answered, UsageError, type Done } from "./cli-errors.js";

/** What a checked `runway tools` command does once connected. */
export type ToolsAction = (client: RunwayClient) => Promise<Done>;

function usage(message: string): UsageError {
  return new UsageError(message, "tools");
}

/** Polls a run until it ended (a tool run is short; a line on stderr every few seconds says it is still going). */
async function settle(client: RunwayClient, runId: string, deadlineMs: number): Promise<ApiAnswer> {
  const started = Date.now();
  let told = started;
  for (;;) {
    const got = await client.getRun(runId);
    const run = got.run as { status?: string } | undefined;
    if (run && ["succeeded", "failed", "cancelled"].includes(run.status ?? "")) return got;
    if (Date.now() - started > deadlineMs) return got;
    if (Date.now() - told > 3_000) {
      told = Date.now();
      process.stderr.write(`runway: ${runId} is ${run?.status ?? "unknown"} after ${Math.round((told - started) / 1000)} s\n`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The definition a one-step tool run uses: one tool node, the run's whole input as its arguments. */
function toolCallDefinition(server: string, tool: string) {
  const name = `tool-call-${createHash("sha256").update(`${server}/${tool}`).digest("hex").slice(0, 16)}`;
  return {
    name,
    description: `runway tools call ${server} ${tool}`,
    nodes: [{ id: "call", kind: "tool", server, tool, arguments: "${input}", retry: { max_attempts: 1, backoff_ms: 0, max_backoff_ms: 0 } }],
  };
}

/** Checks `runway tools <sub> …` and answers what it does; a wrong command line (or file) throws a UsageError. */
export function toolsCommand(sub: string | undefined, positionals: string[], values: { server?: string; args?: string; "timeout-ms"?: string }): ToolsAction {
  if (sub === "servers") {
    const [verb, arg] = positionals;
    if (verb === "put" && arg) {
      const server = jsonFile("tools", arg);
      if (typeof server !== "object" || server === null || Array.isArray(server)) throw usage(`${arg}: a tool server is a JSON object`);
      return async (client) => answered("tools servers put", await client.putToolServer(server as Record<string, unknown>));
    }
    if (verb === "get" && arg) return async (client) => answered("tools servers get", await client.getToolServer(arg));
    if (verb === "ls") return async (client) => answered("tools servers ls", await client.listToolServers());
    if (verb === "rm" && arg) return async (client) => answered("tools servers rm", await client.deleteToolServer(arg));
    throw usage("tools servers put <file.json> | get <name> | ls | rm <name>");
  }
  if (sub === "ls") return async (client) => answered("tools ls", await client.listTools(values.server));
  if (sub === "call") {
    const [server, tool] = positionals;
    if (!server || !tool) throw usage("tools call <server> <tool> [--args JSON]: which server and tool?");
    const args = jsonObjectFlag("tools", "--args", values.args ?? "{}");
    const timeoutMs = Number(values["timeout-ms"] ?? 120_000);
    if (!(Number.isInteger(timeoutMs) && timeoutMs > 0)) throw usage(`--timeout-ms ${values["timeout-ms"]}: expected milliseconds`);
    return async (client) => {
      const put = await client.putDefinition(toolCallDefinition(server, tool));
      if (put.outcome !== "published" && put.outcome !== "unchanged") return { print: put, failed: true };
      const started = await client.startRun({ definition: String(put.name), input: args, source: "cli" });
      if (started.outcome !== "started") return { print: started, failed: true };
      const runId = (started.run as { id: string }).id;
      const ended = await settle(client, runId, timeoutMs);
      const run = ended.run as { status: string; result?: { call?: unknown }; nodes?: Record<string, { error?: unknown }> } | undefined;
      if (run?.status === "succeeded") return { print: { outcome: "ok", run: runId, result: run.result?.call ?? null } };
      return { print: { outcome: run?.status ?? "unknown", run: runId, error: run?.nodes?.call?.error ?? null }, failed: true };
    };
  }
  throw usage(
    sub
      ? `unknown subcommand: tools ${sub} (tools servers … | tools ls | tools call <server> <tool>)`
      : "which one? tools servers … | tools ls | tools call <server> <tool>",
  );
}
