import { validateAgainstSchema } from "../workflow/index.js";
import { fail, publish, succeed, type Draft } from "./draft.js";
import { advance } from "./progression.js";
import type { RunContext } from "./types.js";
import type { ExecutionEvent } from "./requests.js";

/**
 * Signals: a `wait` node holds its run (waiting, no worker, no scheduler slot) until a signal of
 * its name arrives (`runs.signal`), whose data — checked against the node's schema before
 * anything is written — becomes its output; or until its timeout, when it fails `wait_timeout`.
 * A signal wakes every node waiting for its name.
 */

type On<T extends ExecutionEvent["type"]> = Extract<ExecutionEvent, { type: T }>;

/** The run's active `wait` nodes for `name`. */
export function waitingFor(run: RunContext | null | undefined, e: ExecutionEvent, name: string): string[] {
  if (!run) return [];
  return e.plan.nodes.filter((n) => n.kind === "wait" && n.signal === name && run.nodes[n.id]?.s === "active").map((n) => n.id);
}

/** Why the signal's data does not fit a waiting node's schema (undefined: it fits every one). */
export function signalProblem(run: RunContext | null | undefined, e: ExecutionEvent): string | undefined {
  if (e.type !== "run.signal") return undefined;
  for (const id of waitingFor(run, e, e.name)) {
    const node = e.plan.nodes.find((n) => n.id === id);
    if (node?.kind !== "wait" || !node.schema) continue;
    const checked = validateAgainstSchema(node.schema, e.data ?? null);
    if (!checked.ok) return `${id}: ${checked.errors.map((x) => `${x.path}: ${x.message}`).join("; ")}`;
  }
  return undefined;
}

export function onSignal(d: Draft, e: On<"run.signal">): void {
  const nodes = waitingFor(d.run, e, e.name);
  for (const id of nodes) {
    delete d.run.nodes[id]!.wake_at;
    publish(d, "signal_received", { node: id, signal: e.name, by: e.by });
    succeed(d, id, e.data ?? null);
  }
  d.effects.push({ type: "runway.answer", value: { outcome: "delivered", nodes } });
  advance(d);
}

/** A wait node's timeout: it fails `wait_timeout` (a `continue_on_error` or a `needs … failed` may go on). */
export function onSignalTimeout(d: Draft, node: string): void {
  const n = d.run.nodes[node]!;
  delete n.wake_at;
  const plan = d.byId.get(node);
  fail(d, node, { code: "wait_timeout", message: `no signal '${plan?.kind === "wait" ? plan.signal : "?"}' arrived in time` });
}
