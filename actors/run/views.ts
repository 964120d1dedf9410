import { runSummary, type RunContext } from "../../machines/index.js";
import type { RunSummaryEntry } from "./runs-index.js";

/** The narrow read of a run (seed 004): what a start answer carries. */
export type RunSummary = ReturnType<typeof runSummary>;

/** How the API shows a run: its summary, its nodes and how it waits or ended. */
export type RunView = ReturnType<typeof runSummary> & {
  /** Present (true) when the record was compacted after the ended-run retention: only the final summary is left. */
  compacted?: true;
  lane: string;
  /** Who started it, when the caller was authenticated (`key:<tenant>/<name>`). */
  initiator?: string;
  input: unknown;
  waiting: { on: string | null; ref: string | null; expires_at: number | null } | null;
  result: unknown;
  result_truncated: boolean;
  error: unknown;
  nodes: Record<
    string,
    { status: string; attempt?: number; error?: unknown; items?: number; reconcile?: { key: string; server: string; tool: string; since: number } }
  >;
  cancel: unknown;
};

/** A run as its stored record shows it; `input` read beside it. */
export function view(run: RunContext, input: unknown): RunView {
  const nodes: RunView["nodes"] = {};
  for (const [id, n] of Object.entries(run.nodes)) {
    nodes[id] = {
      status: n.s,
      ...(n.step ? { attempt: n.step.attempt } : {}),
      ...(n.error ? { error: n.error } : {}),
      ...(n.map ? { items: n.map.total } : {}),
      ...(n.reconcile ? { reconcile: n.reconcile } : {}),
    };
  }
  const lc = run.lifecycle;
  return {
    ...runSummary(run),
    lane: run.lane ?? "batch",
    ...(run.initiator ? { initiator: run.initiator } : {}),
    input,
    waiting: lc.status === "waiting" ? { on: lc.waiting_on, ref: lc.waiting_ref, expires_at: lc.waiting_expires_at } : null,
    result: run.result,
    result_truncated: run.result_truncated,
    ...(run.partial_reason ? { partial_reason: run.partial_reason } : {}),
    ...(run.refs ? { refs: run.refs } : {}),
    ...(run.usage ? { usage: run.usage } : {}),
    error: run.error,
    nodes,
    cancel: run.cancel,
  };
}

/** What is left to show of a run once its record was compacted: its final summary. */
export function compactedView(s: RunSummaryEntry): RunView {
  const { lane, project: _project, error, result_truncated, counted: _counted, ...summary } = s;
  return {
    ...summary,
    compacted: true,
    lane,
    input: null,
    waiting: null,
    result: null,
    result_truncated,
    error,
    nodes: {},
    cancel: null,
  };
}
