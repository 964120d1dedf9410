import type { NatsConnection } from "@nats-io/transport-node";
import { changedKeys, type ItemRun, type NodeRun, type RunContext } from "../../machines/index.js";
import type { Effect } from "../../runtime/index.js";
import { listedValues, sha256Hex } from "../records/index.js";

/** Bucket of the open reconciliation items: `<tenant>.<run>.<hash of the effect key>`. */
export const RECONCILE_BUCKET = "rw_reconcile";

/** An intent whose outcome is unknown, held for a person to settle (`runs.reconcile`). */
export interface ReconcileItem {
  run: string;
  node: string;
  item?: number;
  key: string;
  server: string;
  tool: string;
  since: number;
}

function keyOf(tenant: string, run: string, effectKey: string): string {
  return `${tenant}.${run}.${sha256Hex(effectKey).slice(0, 32)}`;
}

type Hold = NonNullable<ItemRun["reconcile"]>;

/**
 * The index entries a run transition opens and closes (the run actor's `effects` hook): a held
 * step is listed for its tenant from the write that held it until the write that settled it.
 * Plain idempotent puts and purges, re-applied from the outbox after a crash. A transition
 * replaces a hold it changes, never edits it, so only the holds whose object changed are
 * compared: one that touches none walks the head's nodes and allocates nothing.
 */
export function reconcileIndexEffects(before: RunContext | null | undefined, after: RunContext | null | undefined): Effect[] {
  if (!after) return [];
  const out: Effect[] = [];
  // A head holds every node of its plan from its create on; a map's settled items leave its `live`.
  for (const node in after.nodes) {
    const n: NodeRun = after.nodes[node]!;
    const b: NodeRun | undefined = before?.nodes[node];
    compareHold(out, after, node, undefined, b?.reconcile, n.reconcile);
    const live = n.map?.live;
    const wasLive = b?.map?.live;
    if (live === wasLive) continue;
    // An item the transition did not reach is the same object as before (machines/execution/items.ts):
    // when the decision's reached keys are known, only those are compared.
    const reached = changedKeys(wasLive, live);
    if (reached) {
      for (const i of reached) compareHold(out, after, node, Number(i), wasLive![i]?.reconcile, live![i]?.reconcile);
      continue;
    }
    for (const i in live) if (live[i] !== wasLive?.[i]) compareHold(out, after, node, Number(i), wasLive?.[i]?.reconcile, live[i]!.reconcile);
    for (const i in wasLive) if (!live || !(i in live)) compareHold(out, after, node, Number(i), wasLive[i]!.reconcile, undefined);
  }
  return out;
}

/** The index entries one hold's change adds and removes (a function of its own: no closure per transition). */
function compareHold(out: Effect[], after: RunContext, node: string, item: number | undefined, was: Hold | undefined, now: Hold | undefined): void {
  if (was === now) return;
  if (now && now.key !== was?.key) {
    const entry: ReconcileItem = { run: after.id, node, ...(item !== undefined ? { item } : {}), ...now };
    out.push({ type: "runway.store", bucket: RECONCILE_BUCKET, key: keyOf(after.tenant, after.id, now.key), value: entry });
  }
  if (was && was.key !== now?.key) out.push({ type: "runway.store", bucket: RECONCILE_BUCKET, key: keyOf(after.tenant, after.id, was.key), value: null });
}

/** A tenant's open reconciliation items (optionally of one run), oldest first. */
export async function listReconciliations(nc: NatsConnection, tenant: string, run?: string): Promise<ReconcileItem[]> {
  const out: ReconcileItem[] = [];
  for (const v of await listedValues(nc, RECONCILE_BUCKET, run ? `${tenant}.${run}.*` : `${tenant}.>`)) {
    if (v.data.length > 0) out.push(JSON.parse(new TextDecoder().decode(v.data)) as ReconcileItem);
  }
  return out.sort((a, b) => a.since - b.since);
}
