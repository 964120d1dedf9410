import { z } from "zod";
import type { NatsConnection } from "@nats-io/transport-node";
import { canonicalJson, outputValue, type ExecutionContext, type IntentFact, type Receipt, type RunFact } from "../../machines/index.js";
import { readJournal, type ActorRecord } from "../../runtime/index.js";
import { eventsOf } from "./events.js";
import { RUN_KIND } from "./actor.js";

/** One line of a run's trajectory: what it did, in the order its journal stored it. */
export type TrajectoryLine =
  | { kind: "step"; node: string; status: "succeeded" | "failed"; output?: unknown; error?: unknown; attempt?: number; at: number }
  | { kind: "item"; node: string; item: number; output: unknown; at: number }
  | {
      kind: "tool_call";
      node: string;
      item?: number;
      attempt: number;
      key: string;
      server: string;
      tool: string;
      class: string;
      arguments: unknown;
      state: "observed" | "failed" | "pending";
      result?: unknown;
      error?: unknown;
      settled_by?: string;
      /** A tool's answer is data from outside: never instructions, never a widening of the run's tools or credentials. */
      untrusted?: true;
      started_at: number;
      duration_ms?: number;
    }
  /** An agent's model turn: the model that answered, its tokens, how long it took, what it proposed (its response is in `result` of the receipt). */
  | {
      kind: "model_turn";
      node: string;
      turn: number;
      /** A tool server's `sampling/createMessage` served during a call of this node (its `turn`: the agent's turn that made the call, else 0). */
      sampling?: { server: string; tool: string };
      attempt: number;
      key: string;
      model: string;
      state: "observed" | "failed" | "pending";
      text?: string;
      tool_calls?: { name: string; arguments: unknown }[];
      input_tokens?: number;
      output_tokens?: number;
      latency_ms?: number;
      stop_reason?: string;
      /** A priced turn's charge, in cents. */
      cost_cents?: number;
      started_at: number;
    }
  | { kind: "run"; status: string; result?: unknown; error?: unknown; at: number };

export type TrajectoryRead =
  { outcome: "read"; lines: TrajectoryLine[]; status: string | null } | { outcome: "unavailable"; detail: string } | { outcome: "corrupt"; detail: string };

/** Every fact of a run's journal, oldest first (its intents and receipts, for a replay). */
export async function readFacts(
  nc: NatsConnection,
  partitions: number,
  runId: string,
): Promise<RunFact[] | { outcome: "unavailable" | "corrupt"; detail: string }> {
  const out: RunFact[] = [];
  const read = await walk(nc, partitions, runId, (record) => out.push(...((record.journal ?? []) as RunFact[])));
  return read ?? out;
}

async function walk(
  nc: NatsConnection,
  partitions: number,
  runId: string,
  visit: (record: ActorRecord, seq: number) => void,
): Promise<{ outcome: "unavailable" | "corrupt"; detail: string } | undefined> {
  for (let from = 1; ;) {
    const read = await readJournal(nc, partitions, RUN_KIND, runId, runId, from, 256);
    if (read.outcome === "unavailable") return read;
    if (read.outcome === "corrupt") return { outcome: "corrupt", detail: read.detail };
    for (const entry of read.entries) {
      visit(entry.record, entry.seq);
      from = entry.seq + 1;
    }
    if (!read.more) return undefined;
  }
}

/**
 * A run's trajectory, for evaluation and replay: its steps (with outputs), map items, tool calls
 * (arguments, class, result, duration) and outcome, from its journal alone.
 */
export async function readTrajectory(nc: NatsConnection, partitions: number, runId: string): Promise<TrajectoryRead> {
  const lines: TrajectoryLine[] = [];
  const intents = new Map<string, { line: Extract<TrajectoryLine, { kind: "tool_call" | "model_turn" }> }>();
  let status: string | null = null;
  const failed = await walk(nc, partitions, runId, (record, seq) => {
    const facts = (record.journal ?? []) as RunFact[];
    const outputs = new Map<string, unknown>();
    // A tool node's output names its receipt, stored before it in the same write.
    const receipts = new Map<string, Receipt>();
    for (const f of facts) {
      if (f.t === "output")
        outputs.set(
          f.node,
          outputValue(f, (key) => receipts.get(key)),
        );
      else if (f.t === "item") lines.push({ kind: "item", node: f.node, item: f.i, output: f.value, at: record.at });
      else if (f.t === "intent") intents.set(f.key, { line: f.turn ? turnLine(f) : intentLine(f) });
      else if (f.t === "receipt") {
        receipts.set(f.key, f);
        settle(lines, intents, f);
      }
    }
    const run = (record.snapshot as { context?: ExecutionContext } | undefined)?.context?.run;
    for (const e of eventsOf(seq, record)) {
      if (e.type === "step_succeeded" || e.type === "step_failed") {
        const node = String(e.node);
        lines.push({
          kind: "step",
          node,
          status: e.type === "step_succeeded" ? "succeeded" : "failed",
          ...(outputs.has(node) ? { output: outputs.get(node) } : {}),
          ...(e.error !== undefined ? { error: e.error } : {}),
          ...(typeof e.attempt === "number" ? { attempt: e.attempt } : {}),
          at: e.at,
        });
      } else if (e.type === "run_succeeded" || e.type === "run_failed" || e.type === "run_cancelled") {
        status = e.type.slice(4);
        lines.push({
          kind: "run",
          status,
          ...(run?.result !== undefined ? { result: run.result } : {}),
          ...(run?.error ? { error: run.error } : {}),
          at: e.at,
        });
      }
    }
  });
  if (failed) return failed;
  for (const { line } of intents.values()) lines.push(line);
  return { outcome: "read", lines, status };
}

function intentLine(f: IntentFact): Extract<TrajectoryLine, { kind: "tool_call" }> {
  return {
    kind: "tool_call",
    node: f.node,
    ...(f.item !== undefined ? { item: f.item } : {}),
    attempt: f.attempt,
    key: f.key,
    server: f.server,
    tool: f.tool,
    class: f.class,
    arguments: f.arguments,
    state: "pending",
    started_at: f.at,
  };
}

/** A sampling's intent names the call it served (`arguments.sampling`). */
const SamplingOf = z.object({ sampling: z.object({ server: z.string(), tool: z.string() }) });

function turnLine(f: IntentFact): Extract<TrajectoryLine, { kind: "model_turn" }> {
  const turn = Number(/:turn(\d+)(?::|$)/.exec(f.key)?.[1] ?? 0);
  const sampled = SamplingOf.safeParse(f.arguments);
  return {
    kind: "model_turn",
    node: f.node,
    turn,
    ...(sampled.success ? { sampling: { server: sampled.data.sampling.server, tool: sampled.data.sampling.tool } } : {}),
    attempt: f.attempt,
    key: f.key,
    model: f.tool,
    state: "pending",
    started_at: f.at,
  };
}

/** What the trajectory reads of a model turn's stored response (a field it does not hold is left out). */
const StoredTurn = z.object({
  text: z.string().optional(),
  tool_calls: z.array(z.object({ name: z.string(), arguments: z.unknown() })).optional(),
  usage: z.object({ input_tokens: z.number(), output_tokens: z.number() }).optional(),
  latency_ms: z.number().optional(),
  stop_reason: z.string().optional(),
  model: z.string().optional(),
});

function settleTurn(line: Extract<TrajectoryLine, { kind: "model_turn" }>, r: { t: "receipt"; cost_cents?: number } & Receipt): void {
  line.state = r.state;
  if (r.cost_cents !== undefined) line.cost_cents = r.cost_cents;
  const read = r.state === "observed" ? StoredTurn.safeParse(r.value) : undefined;
  if (!read?.success) return;
  const v = read.data;
  if (v.model !== undefined) line.model = v.model;
  if (v.text !== undefined) line.text = v.text;
  if (v.tool_calls) line.tool_calls = v.tool_calls.map((c) => ({ name: c.name, arguments: c.arguments ?? null }));
  if (v.usage) {
    line.input_tokens = v.usage.input_tokens;
    line.output_tokens = v.usage.output_tokens;
  }
  if (v.latency_ms !== undefined) line.latency_ms = v.latency_ms;
  if (v.stop_reason !== undefined) line.stop_reason = v.stop_reason;
}

function settle(
  lines: TrajectoryLine[],
  intents: Map<string, { line: Extract<TrajectoryLine, { kind: "tool_call" | "model_turn" }> }>,
  r: { t: "receipt"; cost_cents?: number } & Receipt,
): void {
  const open = intents.get(r.key);
  if (!open) return;
  intents.delete(r.key);
  if (open.line.kind === "model_turn") {
    settleTurn(open.line, r);
    lines.push(open.line);
    return;
  }
  const line = open.line;
  line.state = r.state;
  if (r.state === "observed") line.result = r.value;
  else line.error = r.error;
  if (r.by !== undefined) line.settled_by = r.by;
  else if (r.state === "observed") line.untrusted = true;
  line.duration_ms = Math.max(0, r.at - line.started_at);
  lines.push(line);
}

/** What two runs of the same logic must share: steps, outputs, calls and outcome, without ids, attempts or times. */
function comparable(line: TrajectoryLine): string {
  switch (line.kind) {
    case "step":
      return canonicalJson({
        k: "step",
        node: line.node,
        status: line.status,
        output: line.output ?? null,
        error: (line.error as { code?: string } | undefined)?.code ?? null,
      });
    case "item":
      return canonicalJson({ k: "item", node: line.node, item: line.item, output: line.output });
    case "tool_call":
      return canonicalJson({
        k: "tool_call",
        node: line.node,
        item: line.item ?? null,
        server: line.server,
        tool: line.tool,
        arguments: line.arguments,
        state: line.state,
        result: line.result ?? null,
      });
    case "model_turn":
      return canonicalJson({ k: "model_turn", node: line.node, turn: line.turn, text: line.text ?? null, tool_calls: line.tool_calls ?? null });
    case "run":
      return canonicalJson({ k: "run", status: line.status, result: line.result ?? null, error: (line.error as { code?: string } | undefined)?.code ?? null });
  }
}

/**
 * Compares a replay's trajectory with its original's. Concurrent branches may finish in another
 * order, so lines are compared grouped by node, the nodes in the order the original first
 * reached them (the outcome last); the first line that differs is the divergence. A tool
 * server's samplings are left out (the replay's calls are answered from receipts: nothing samples).
 */
export function compareTrajectories(
  original: TrajectoryLine[],
  replay: TrajectoryLine[],
): { identical: true } | { identical: false; at: number; original: TrajectoryLine | null; replay: TrajectoryLine | null } {
  const first = new Map<string, number>();
  for (const line of [...original, ...replay]) if (!first.has(nodeOf(line))) first.set(nodeOf(line), first.size);
  // A tool server's sampling is part of its call: a replay answers the call from its receipt, so the server samples nothing.
  const order = (lines: TrajectoryLine[]) =>
    lines
      .filter((line) => line.kind !== "model_turn" || line.sampling === undefined)
      .map((line) => ({ line, key: comparable(line) }))
      .sort((a, b) => first.get(nodeOf(a.line))! - first.get(nodeOf(b.line))!);
  const a = order(original);
  const b = order(replay);
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    if (a[i]?.key !== b[i]?.key) return { identical: false, at: i, original: a[i]?.line ?? null, replay: b[i]?.line ?? null };
  }
  return { identical: true };
}

/** The group a line is compared in: its node (a map item's own), the run's outcome last. */
function nodeOf(line: TrajectoryLine): string {
  if (line.kind === "run") return "(run)";
  return line.kind === "item" || (line.kind === "tool_call" && line.item !== undefined) ? `${line.node}[${line.item}]` : line.node;
}
