/**
 * `runway run …`: starting, reading, following and steering runs.
 *
 *   runway run start <definition> [--input JSON] [--key SOURCE:ID] [--lane L] [--project P] [--priority N]
 *   runway run get|cancel|watch|events|trajectory|replay|held <id>     runway run list [--status S]
 *   runway run signal <id> <name> [--data JSON]     runway run reconcile <id> --key K --decision D
 */
import type { NatsConnection } from "@nats-io/transport-node";
import { ID_PATTERN } from "../runtime/index.js";
import type { ApiAnswer, RunwayClient } from "./client.js";
import { followRun } from "./follow.js";

export class RunsUsageError extends Error {}

/** The options `runway run` accepts (beside the connection's). */
export const RUN_OPTIONS = {
  input: { type: "string" },
  key: { type: "string" },
  lane: { type: "string" },
  source: { type: "string", default: "cli" },
  project: { type: "string" },
  priority: { type: "string" },
  status: { type: "string" },
  limit: { type: "string" },
  cursor: { type: "string" },
  after: { type: "string" },
  reason: { type: "string" },
  decision: { type: "string" },
  "wait-ms": { type: "string" },
  data: { type: "string" },
  result: { type: "string" },
  by: { type: "string" },
} as const;

type RunValues = { [K in keyof typeof RUN_OPTIONS]?: string };

/** What to print (nothing for a command that wrote its own lines) and whether the command failed. */
export type RunCommandDone = { print?: ApiAnswer; failed?: boolean };

export async function runCommand(
  c: RunwayClient,
  nc: NatsConnection,
  tenant: string,
  sub: string | undefined,
  positionals: string[],
  values: RunValues,
): Promise<RunCommandDone> {
  const id = positionals[0];
  if (sub === "start" && id) {
    const key = values.key?.split(":");
    return {
      print: await c.startRun({
        definition: id,
        input: values.input ? JSON.parse(values.input) : {},
        ...(key && key.length >= 2 ? { start_key: { source: key[0]!, delivery_id: key.slice(1).join(":") } } : {}),
        ...(values.lane === "batch" || values.lane === "interactive" || values.lane === "migration" ? { lane: values.lane } : {}),
        // Who asks decides the default lane: a person at the CLI is interactive where the tenant allows `cli`.
        source: values.source ?? "cli",
        ...(values.project ? { project: values.project } : {}),
        // Passed as given: the API answers invalid_input for anything but an integer 0–9.
        ...(values.priority !== undefined ? { priority: Number(values.priority) } : {}),
      }),
    };
  }
  if (sub === "get" && id) return { print: await c.getRun(id) };
  if (sub === "list")
    return {
      print: await c.listRuns({
        ...(values.status ? { status: values.status } : {}),
        ...(values.limit ? { limit: Number(values.limit) } : {}),
        ...(values.cursor ? { cursor: values.cursor } : {}),
      }),
    };
  if (sub === "cancel" && id) return { print: await c.cancelRun(id, values.reason) };
  if (sub === "held") return { print: await c.reconciliations(id) };
  if (sub === "signal" && id && positionals[1]) {
    const data = values.data === undefined ? undefined : (JSON.parse(values.data) as unknown);
    const answer = await c.signal(id, positionals[1], data);
    return { print: answer, failed: answer.outcome !== "delivered" };
  }
  if (sub === "trajectory" && id) {
    // JSON lines, one per step, item, tool call and outcome: ready for an evaluation pipeline.
    const answer = await c.trajectory(id);
    if (answer.outcome !== "trajectory") return { print: answer, failed: true };
    for (const line of answer.lines as unknown[]) process.stdout.write(`${JSON.stringify(line)}\n`);
    return {};
  }
  if (sub === "replay" && id) {
    const answer = await c.replay(id, values["wait-ms"] ? Number(values["wait-ms"]) : undefined);
    return { print: answer, failed: answer.outcome !== "replayed" || answer.identical !== true };
  }
  if (sub === "reconcile" && id) {
    const decision = values.decision;
    if (!values.key || (decision !== "done" && decision !== "retry" && decision !== "abandon"))
      throw new RunsUsageError("run reconcile <id> --key K --decision done|retry|abandon [--result JSON]");
    const result = values.result === undefined ? undefined : (JSON.parse(values.result) as unknown);
    const answer = await c.reconcile(id, values.key, decision, { ...(result !== undefined ? { result } : {}), by: values.by ?? "cli" });
    return { print: answer, failed: answer.outcome !== "settled" };
  }
  if (sub === "watch" && id) {
    // The id goes into a subject filter: a wildcard would follow other runs.
    if (!ID_PATTERN.test(id)) throw new RunsUsageError(`run id ${JSON.stringify(id)}: expected 1-200 characters of [A-Za-z0-9_=-]`);
    return (await watch(c, nc, tenant, id)) ? {} : { failed: true };
  }
  if (sub === "events" && id)
    return {
      print: await c.runEvents(id, {
        ...(values.after ? { after: values.after } : {}),
        ...(values.limit ? { limit: Number(values.limit) } : {}),
      }),
    };
  throw new RunsUsageError("run start|get|list|events|watch|cancel|signal|held|reconcile|trajectory|replay");
}

/**
 * Prints a run's progress events from the start of its history until it ends: what its journal
 * holds, then live events as they come (see followRun). False if there is no such run.
 */
async function watch(client: RunwayClient, nc: NatsConnection, tenant: string, runId: string): Promise<boolean> {
  const first = await client.runEvents(runId, { limit: 1 });
  if (first.outcome !== "events") {
    process.stdout.write(`${JSON.stringify(first, null, 2)}\n`);
    return false;
  }
  if (first.compacted) {
    process.stdout.write(`${runId}: its record was compacted after the ended-run retention; runs.get shows its final summary\n`);
    return true;
  }
  for await (const e of followRun(nc, client, tenant, runId)) {
    const what = [
      e.node ?? "",
      e.item !== undefined ? `[${String(e.item)}]` : "",
      e.attempt ? ` attempt ${String(e.attempt)}` : "",
      e.error ? ` ${(e.error as { code: string }).code}: ${(e.error as { message: string }).message}` : "",
    ].join("");
    process.stdout.write(`${new Date(e.at).toISOString()}  ${(e.id ?? "live").padEnd(10)}  ${e.type.padEnd(15)} ${what}\n`);
  }
  return true;
}
