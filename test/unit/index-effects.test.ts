/**
 * The run actor's index effects (the reviewers' inbox and the reconciliation index) compare only
 * what a transition replaced. Checked here against the full diff they replaced (every pending
 * approval and every hold of both heads, by id), over random transitions shaped as the run
 * machine makes them: nodes copied shallowly, a map's items copied only when a change reaches
 * them (the others stay the same objects), approvals and holds replaced, never edited.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { inboxEffects } from "../../actors/run/approvals.js";
import { reconcileIndexEffects } from "../../actors/run/reconciliations.js";
import { ADMISSION, type ApprovalState, type ItemRun, type NodeRun, type RunContext } from "../../machines/index.js";
import type { Effect } from "../../runtime/index.js";

type Store = Extract<Effect, { type: "runway.store" }>;
type Hold = NonNullable<ItemRun["reconcile"]>;

/** The inbox diff as it was: every pending approval of both heads, by id. */
function fullInbox(before: RunContext | null, after: RunContext): Map<string, unknown> {
  const pending = (run: RunContext | null) => {
    const out = new Map<string, { node: string; a: ApprovalState }>();
    for (const [node, n] of Object.entries(run?.nodes ?? {})) if (n.approval?.state === "pending") out.set(n.approval.id, { node, a: n.approval });
    if (run?.admission_approval?.state === "pending") out.set(run.admission_approval.id, { node: ADMISSION, a: run.admission_approval });
    return out;
  };
  const was = pending(before);
  const now = pending(after);
  const out = new Map<string, unknown>();
  for (const [id, { node, a }] of now) {
    if (was.has(id)) continue;
    const { state: _state, ...request } = a as Extract<ApprovalState, { state: "pending" }>;
    out.set(id, { ...request, run: after.id, node, kind: node === ADMISSION ? "admission" : "node" });
  }
  for (const id of was.keys()) if (!now.has(id)) out.set(id, null);
  return out;
}

/** The reconciliation diff as it was: every hold of both heads, by effect key. */
function fullHolds(before: RunContext | null, after: RunContext): Map<string, unknown> {
  const holds = (run: RunContext | null) => {
    const out = new Map<string, unknown>();
    for (const [node, n] of Object.entries(run?.nodes ?? {})) {
      if (n.reconcile) out.set(n.reconcile.key, { run: after.id, node, ...n.reconcile });
      for (const [i, it] of Object.entries(n.map?.live ?? {}))
        if (it.reconcile) out.set(it.reconcile.key, { run: after.id, node, item: Number(i), ...it.reconcile });
    }
    return out;
  };
  const was = holds(before);
  const now = holds(after);
  const out = new Map<string, unknown>();
  for (const [key, item] of now) if (!was.has(key)) out.set(key, item);
  for (const key of was.keys()) if (!now.has(key)) out.set(key, null);
  return out;
}

/** What a list of store effects leaves, by the id or key each value names (a purge: null). */
function applied(effects: Effect[], idOf: (value: Record<string, unknown>) => string, keys: Map<string, string>): Map<string, unknown> {
  const out = new Map<string, unknown>();
  for (const e of effects as Store[]) {
    const id = e.value === null ? keys.get(e.key)! : idOf(e.value as Record<string, unknown>);
    expect(out.has(id), `one effect per entry (${id})`).toBe(false);
    out.set(id, e.value);
  }
  return out;
}

const step = { status: "running", attempt: 1, lease_epoch: 1, not_before: null, last_error: null, started_at: 1, ended_at: null } as const;

function pending(id: string, at: number): ApprovalState {
  return { id, state: "pending", prompt: "go?", payload: { at }, group: null, escalation_group: null, requested_at: at, expires_at: at + 1_000 };
}

function hold(key: string, at: number): Hold {
  return { key, server: "s", tool: "t", since: at };
}

/** One change a transition may make, applied to the copy it writes (the copy's nodes are new objects; what they hold is shared). */
type Change =
  | { t: "approve" | "reopen" | "drop"; node: number }
  | { t: "hold" | "settle"; node: number; item?: number }
  | { t: "remove_item" | "add_item"; node: number; item: number }
  | { t: "admission"; to: "pending" | "decided" | "none" };

const NODES = 3;
const ITEMS = 3;

const change: fc.Arbitrary<Change> = fc.oneof(
  fc.record({ t: fc.constantFrom("approve" as const, "reopen" as const, "drop" as const), node: fc.nat(NODES - 1) }),
  fc.record({ t: fc.constantFrom("hold" as const, "settle" as const), node: fc.nat(NODES - 1), item: fc.option(fc.nat(ITEMS - 1), { nil: undefined }) }),
  fc.record({ t: fc.constantFrom("remove_item" as const, "add_item" as const), node: fc.nat(NODES - 1), item: fc.nat(ITEMS - 1) }),
  fc.record({ t: fc.constant("admission" as const), to: fc.constantFrom("pending" as const, "decided" as const, "none" as const) }),
);

function head(): RunContext {
  const nodes: Record<string, NodeRun> = {};
  for (let n = 0; n < NODES; n++) {
    nodes[`n${n}`] =
      n === NODES - 1
        ? { s: "active", map: { total: ITEMS, next: ITEMS, live: { "0": { step } }, succeeded: 0, failed: 0, output_bytes: 0 } }
        : { s: "active", step };
  }
  return { id: "t_run", tenant: "t", nodes } as unknown as RunContext;
}

/** The next head, as `copyForWrite` and a decision make it (machines/execution/items.ts). */
function next(run: RunContext, changes: Change[], at: number): RunContext {
  const nodes: Record<string, NodeRun> = {};
  for (const [id, n] of Object.entries(run.nodes)) nodes[id] = n.map ? { ...n, map: { ...n.map, live: { ...n.map.live } } } : { ...n };
  const copy: RunContext = { ...run, nodes };
  const copied = new Set<ItemRun>();
  const reach = (n: NodeRun, item: number): ItemRun | undefined => {
    const it = n.map?.live[String(item)];
    if (!it || copied.has(it)) return it;
    const own = { ...it };
    copied.add(own);
    return (n.map!.live[String(item)] = own);
  };
  for (const c of changes) {
    if (c.t === "admission") {
      if (c.to === "none") delete copy.admission_approval;
      else copy.admission_approval = c.to === "pending" ? pending(`t_run:${ADMISSION}:${at}`, at) : { id: "t_run:adm", state: "approved", by: "p", at };
      continue;
    }
    const id = `n${c.node}`;
    const n = copy.nodes[id]!;
    const holder: ItemRun | NodeRun | undefined = "item" in c && c.item !== undefined ? reach(n, c.item) : n;
    if (c.t === "approve") n.approval = n.approval ? { id: n.approval.id, state: "approved", by: "p", at } : undefined;
    else if (c.t === "reopen") n.approval = pending(`t_run:${id}`, at);
    else if (c.t === "drop") delete n.approval;
    else if (c.t === "hold" && holder && !holder.reconcile) holder.reconcile = hold(`t_run:${id}:${c.item ?? "-"}:${at}`, at);
    else if (c.t === "settle" && holder) delete holder.reconcile;
    else if (c.t === "remove_item" && n.map) delete n.map.live[String(c.item)];
    else if (c.t === "add_item" && n.map && !n.map.live[String(c.item)])
      n.map.live[String(c.item)] = { step, reconcile: hold(`t_run:${id}:${c.item}:${at}`, at) };
    if (n.approval === undefined) delete n.approval;
  }
  return copy;
}

describe("the run actor's index effects", () => {
  it("open and close the same inbox entries and reconciliation items as a full diff of both heads, over random transitions", () => {
    fc.assert(
      fc.property(fc.array(fc.array(change, { maxLength: 4 }), { minLength: 1, maxLength: 12 }), (transitions) => {
        let before: RunContext | null = null;
        let run = head();
        const inboxKeys = new Map<string, string>();
        const holdKeys = new Map<string, string>();
        transitions.forEach((changes, t) => {
          const after = before === null ? run : next(run, changes, t + 1);
          const inbox = inboxEffects(before, after) as Store[];
          const holds = reconcileIndexEffects(before, after) as Store[];
          for (const e of inbox) if (e.value !== null) inboxKeys.set(e.key, (e.value as { id: string }).id);
          for (const e of holds) if (e.value !== null) holdKeys.set(e.key, (e.value as { key: string }).key);
          expect(applied(inbox, (v) => v.id as string, inboxKeys)).toEqual(fullInbox(before, after));
          expect(applied(holds, (v) => v.key as string, holdKeys)).toEqual(fullHolds(before, after));
          before = after;
          run = after;
        });
      }),
      { numRuns: 500 },
    );
  });
});
