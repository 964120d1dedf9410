/**
 * `runway tools …`: the tenant's MCP servers and their tools, and a one-step tool run to try a
 * server before wiring it into a workflow.
 *
 *   runway tools servers put <file.json> | servers get <name> | servers ls | servers rm <name>
 *   runway tools ls [--server S]
 *   runway tools call <server> <tool> [--args JSON] [--timeout-ms N]
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import type { ApiAnswer, RunwayClient } from "./client.js";

export const TOOLS_USAGE = `  tools servers put <file.json> | tools servers get <name> | tools servers ls | tools servers rm <name>
  tools ls [--server S]                                         every tool with its effective class
  tools call <server> <tool> [--args JSON] [--timeout-ms N]     a one-step tool run through the gateway; prints its result`;

export class ToolsUsageError extends Error {}

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

/** Runs `runway tools <sub> …`; answers what to print and whether it failed. */
export async function toolsCommand(
  client: RunwayClient,
  sub: string | undefined,
  positionals: string[],
  values: { server?: string; args?: string; "timeout-ms"?: string },
): Promise<{ print: unknown; failed?: boolean }> {
  if (sub === "servers") {
    const [verb, arg] = positionals;
    if (verb === "put" && arg) return { print: await client.putToolServer(JSON.parse(readFileSync(arg, "utf8")) as Record<string, unknown>) };
    if (verb === "get" && arg) return { print: await client.getToolServer(arg) };
    if (verb === "ls") return { print: await client.listToolServers() };
    if (verb === "rm" && arg) return { print: await client.deleteToolServer(arg) };
    throw new ToolsUsageError("tools servers put <file.json> | get <name> | ls | rm <name>");
  }
  if (sub === "ls") return { print: await client.listTools(values.server) };
  if (sub === "call") {
    const [server, tool] = positionals;
    if (!server || !tool) throw new ToolsUsageError("tools call <server> <tool> [--args JSON]");
    let args: unknown;
    try {
      args = JSON.parse(values.args ?? "{}");
    } catch {
      throw new ToolsUsageError(`--args ${values.args}: not JSON`);
    }
    if (typeof args !== "object" || args === null || Array.isArray(args)) throw new ToolsUsageError("--args must be a JSON object");
    const put = await client.putDefinition(toolCallDefinition(server, tool));
    if (put.outcome !== "published" && put.outcome !== "unchanged") return { print: put, failed: true };
    const started = await client.startRun({ definition: String(put.name), input: args, source: "cli" });
    if (started.outcome !== "started") return { print: started, failed: true };
    const runId = (started.run as { id: string }).id;
    const ended = await settle(client, runId, Number(values["timeout-ms"] ?? 120_000));
    const run = ended.run as { status: string; result?: { call?: unknown }; nodes?: Record<string, { error?: unknown }> } | undefined;
    if (run?.status === "succeeded") return { print: { outcome: "ok", run: runId, result: run.result?.call ?? null } };
    return { print: { outcome: run?.status ?? "unknown", run: runId, error: run?.nodes?.call?.error ?? null }, failed: true };
  }
  throw new ToolsUsageError("tools servers … | tools ls | tools call <server> <tool>");
}
