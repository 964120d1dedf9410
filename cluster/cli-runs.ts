/**
 * `runway run …`: starting, reading, following and steering runs (usage: cli-help.ts). The command
 * line is checked whole before anything is sent, so a wrong one is a usage error with or without a
 * server.
 */
import type { NatsConnection } from "@nats-io/transport-node";
import { ID_PATTERN } from "../runtime/index.js";
import { RunLaneSchema } from "../machines/index.js";
import type { ApiAnswer, RunwayClient } from "./client.js";
import { jsonFlag, positiveInt } from "./cli-args.js";
import { answered, UsageError, type Done } from "./cli-errors.js";
import { followRun } from "./follow.js";

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

/** What a checked `runway run` command does once connected. */
export type RunAction = (c: RunwayClient, nc: NatsConnection) => Promise<Done>;

const SUBCOMMANDS = "run start|get|list|events|watch|cancel|signal|held|reconcile|trajectory|replay";

function usage(message: string): UsageError {
  return new UsageError(message, "run");
}

const LANES = RunLaneSchema.options;

/** `runway run start <definition> …`, checked. */
function startAction(definition: string, values: RunValues): RunAction {
  const key = values.key === undefined ? undefined : /^([^:]+):(.+)$/.exec(values.key);
  if (key === null) throw usage(`--key ${values.key}: expected SOURCE:DELIVERY`);
  const lane = LANES.find((l) => l === values.lane);
  if (values.lane !== undefined && !lane) throw usage(`--lane ${values.lane}: expected ${LANES.slice(0, -1).join(", ")} or ${LANES.at(-1)}`);
  const request = {
    definition,
    input: values.input ? jsonFlag("run", "--input", values.input) : {},
    // Split at its first `:`: a delivery id may hold more.
    ...(key ? { start_key: { source: key[1]!, delivery_id: key[2]! } } : {}),
    ...(lane ? { lane } : {}),
    // Who asks decides the default lane: a person at the CLI is interactive where the tenant allows `cli`.
    source: values.source ?? "cli",
    ...(values.project ? { project: values.project } : {}),
    // Passed as given: the API answers invalid_input for anything but an integer 0–9.
    ...(values.priority !== undefined ? { priority: Number(values.priority) } : {}),
  };
  // `duplicate`: the start key's run, started before; what a retried start is for.
  return async (c) => answered("run start", await c.startRun(request));
}

/** `runway run trajectory <id>`: JSON lines, one per step, item, tool call and outcome, ready for an evaluation pipeline. */
function trajectoryAction(run: string): RunAction {
  return async (c) => {
    const answer = await c.trajectory(run);
    const done = answered("run trajectory", answer);
    if (done.failed) return done;
    for (const line of answer.lines as unknown[]) process.stdout.write(`${JSON.stringify(line)}\n`);
    return {};
  };
}

/** `runway run replay <id>`: failed unless the replay is identical. */
function replayAction(run: string, values: RunValues): RunAction {
  const waitMs = values["wait-ms"] === undefined ? undefined : Number(values["wait-ms"]);
  if (waitMs !== undefined && !(Number.isInteger(waitMs) && waitMs >= 0)) throw usage(`--wait-ms ${values["wait-ms"]}: expected milliseconds`);
  return async (c) => {
    const answer = await c.replay(run, waitMs);
    const done = answered("run replay", answer);
    return { ...done, failed: done.failed || answer.identical !== true };
  };
}

/** `runway run reconcile <id> --key K --decision D`, checked. */
function reconcileAction(run: string, values: RunValues): RunAction {
  const { key, decision } = values;
  if (!key || (decision !== "done" && decision !== "retry" && decision !== "abandon"))
    throw usage("run reconcile <id> --key K --decision done|retry|abandon [--result JSON]");
  const result = values.result === undefined ? undefined : jsonFlag("run", "--result", values.result);
  return async (c) => answered("run reconcile", await c.reconcile(run, key, decision, { ...(result !== undefined ? { result } : {}), by: values.by ?? "cli" }));
}

/** `runway run watch <id>`, checked: the id goes into a subject filter, where a wildcard would follow other runs. */
function watchAction(tenant: string, run: string): RunAction {
  if (!ID_PATTERN.test(run)) throw usage(`run id ${JSON.stringify(run)}: expected 1-200 characters of [A-Za-z0-9_=-]`);
  return async (c, nc) => {
    const refused = await watch(c, nc, tenant, run);
    return refused ? answered("run watch", refused) : {};
  };
}

/** Checks `runway run <sub> …` and answers what it does; a wrong command line throws a UsageError. */
export function runCommand(tenant: string, sub: string | undefined, positionals: string[], values: RunValues): RunAction {
  const id = positionals[0];
  const needsId = (form: string): string => {
    if (!id) throw usage(`${form}: which run? (missing <id>)`);
    return id;
  };
  switch (sub) {
    case "start":
      if (!id) throw usage("run start <definition>: which definition? (missing <definition>)");
      return startAction(id, values);
    case "get": {
      const run = needsId("run get <id>");
      return async (c) => answered("run get", await c.getRun(run));
    }
    case "list": {
      const limit = positiveInt("run", "--limit", values.limit);
      return async (c) =>
        answered(
          "run list",
          await c.listRuns({
            ...(values.status ? { status: values.status } : {}),
            ...(limit !== undefined ? { limit } : {}),
            ...(values.cursor ? { cursor: values.cursor } : {}),
          }),
        );
    }
    case "cancel": {
      const run = needsId("run cancel <id>");
      return async (c) => answered("run cancel", await c.cancelRun(run, values.reason));
    }
    case "held":
      return async (c) => answered("run held", await c.reconciliations(id));
    case "signal": {
      const run = needsId("run signal <id> <name>");
      const name = positionals[1];
      if (!name) throw usage("run signal <id> <name>: which signal? (missing <name>)");
      const data = values.data === undefined ? undefined : jsonFlag("run", "--data", values.data);
      return async (c) => answered("run signal", await c.signal(run, name, data));
    }
    case "trajectory":
      return trajectoryAction(needsId("run trajectory <id>"));
    case "replay":
      return replayAction(needsId("run replay <id>"), values);
    case "reconcile":
      return reconcileAction(needsId("run reconcile <id>"), values);
    case "watch":
      return watchAction(tenant, needsId("run watch <id>"));
    case "events": {
      const run = needsId("run events <id>");
      const limit = positiveInt("run", "--limit", values.limit);
      return async (c) =>
        answered("run events", await c.runEvents(run, { ...(values.after ? { after: values.after } : {}), ...(limit !== undefined ? { limit } : {}) }));
    }
    default:
      throw usage(sub ? `unknown subcommand: run ${sub} (${SUBCOMMANDS})` : `which one? ${SUBCOMMANDS}`);
  }
}

/**
 * Prints a run's progress events from the start of its history until it ends: what its journal
 * holds, then live events as they come (see followRun). The answer that refused it, if any (no such run).
 */
async function watch(client: RunwayClient, nc: NatsConnection, tenant: string, runId: string): Promise<ApiAnswer | undefined> {
  const first = await client.runEvents(runId, { limit: 1 });
  if (first.outcome !== "events") return first;
  if (first.compacted) {
    process.stdout.write(`${runId}: its record was compacted after the ended-run retention; runs.get shows its final summary\n`);
    return undefined;
  }
  for await (const e of followRun(nc, client, tenant, runId)) {
    const what = [
      e.node ?? "",
      e.item !== undefined ? `[${String(e.item)}]` : "",
      e.attempt ? ` attempt ${String(e.attempt)}` : "",
      e.error ? ` ${(e.error as { code: string }).code}: ${(e.error as { message: string }).message}` : "",
      // A live token: its text, quoted so that one delta stays one line.
      e.type === "text_delta" ? ` turn ${String(e.turn)} ${JSON.stringify(e.text)}` : "",
    ].join("");
    process.stdout.write(`${new Date(e.at).toISOString()}  ${(e.id ?? "live").padEnd(10)}  ${e.type.padEnd(15)} ${what}\n`);
  }
  return undefined;
}
