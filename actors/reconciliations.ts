import type { NatsConnection } from "@nats-io/transport-node";
import { Kvm } from "@nats-io/kv";
import type { ItemRun, NodeRun, RunContext } from "../machines/index.js";
import type { Effect } from "../runtime/index.js";
import { sha256Hex } from "./ids.js";

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

function openItems(run: RunContext | null | undefined): Map<string, ReconcileItem> {
  const out = new Map<string, ReconcileItem>();
  const add = (node: string, item: number | undefined, h: ItemRun | NodeRun) => {
    if (h.reconcile) out.set(h.reconcile.key, { run: run!.id, node, ...(item !== undefined ? { item } : {}), ...h.reconcile });
  };
  for (const [id, n] of Object.entries(run?.nodes ?? {})) {
    add(id, undefined, n);
    for (const [i, it] of Object.entries(n.map?.live ?? {})) add(id, Number(i), it);
  }
  return out;
}

/**
 * The index entries a run transition opens and closes (the run actor's `effects` hook): a held
 * step is listed for its tenant from the write that held it until the write that settled it.
 * Plain idempotent puts and purges, re-applied from the outbox after a crash.
 */
export function reconcileIndexEffects(before: RunContext | null | undefined, after: RunContext | null | undefined): Effect[] {
  if (!after) return [];
  const was = openItems(before);
  const now = openItems(after);
  const out: Effect[] = [];
  for (const [key, item] of now)
    if (!was.has(key)) out.push({ type: "runway.store", bucket: RECONCILE_BUCKET, key: keyOf(after.tenant, after.id, key), value: item });
  for (const key of was.keys())
    if (!now.has(key)) out.push({ type: "runway.store", bucket: RECONCILE_BUCKET, key: keyOf(after.tenant, after.id, key), value: null });
  return out;
}

/** A tenant's open reconciliation items (optionally of one run), oldest first. */
export async function listReconciliations(nc: NatsConnection, tenant: string, run?: string): Promise<ReconcileItem[]> {
  const kv = await new Kvm(nc).open(RECONCILE_BUCKET);
  const out: ReconcileItem[] = [];
  for await (const key of await kv.keys(run ? `${tenant}.${run}.*` : `${tenant}.>`)) {
    const e = await kv.get(key);
    if (e && e.operation === "PUT" && e.length > 0) out.push(e.json<ReconcileItem>());
  }
  return out.sort((a, b) => a.since - b.since);
}
