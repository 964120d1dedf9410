import type { NatsConnection } from "@nats-io/transport-node";
import { Kvm } from "@nats-io/kv";
import { ADMISSION, type ApprovalState, type RunContext } from "../machines/index.js";
import type { Effect } from "../runtime/index.js";
import { sha256Hex } from "./ids.js";

/** Bucket of the reviewers' inbox: one key per pending approval, `<tenant>.<hash of its id>`. */
export const APPROVALS_BUCKET = "rw_approvals";

/**
 * A pending approval as the inbox lists it: its request, and where it waits. `kind`: `node` (an
 * approval node; `node` is its id) or `admission` (the run itself waits to be admitted before
 * anything of it runs; `node` is `(admission)`, its payload the definition and the input).
 */
export type InboxItem = Omit<Extract<ApprovalState, { state: "pending" }>, "state"> & { run: string; node: string; kind: "node" | "admission" };

function keyOf(tenant: string, id: string): string {
  return `${tenant}.${sha256Hex(id).slice(0, 32)}`;
}

function pending(run: RunContext | null | undefined): Map<string, InboxItem> {
  const out = new Map<string, InboxItem>();
  for (const [node, n] of Object.entries(run?.nodes ?? {})) {
    const a = n.approval;
    if (a?.state !== "pending") continue;
    const { state: _state, ...request } = a;
    out.set(a.id, { ...request, run: run!.id, node, kind: "node" });
  }
  const admission = run?.admission_approval;
  if (admission?.state === "pending") {
    const { state: _state, ...request } = admission;
    out.set(admission.id, { ...request, run: run!.id, node: ADMISSION, kind: "admission" });
  }
  return out;
}

/** The inbox entries a run transition opens and closes (the run actor's `effects` hook), like the reconciliation index. */
export function inboxEffects(before: RunContext | null | undefined, after: RunContext | null | undefined): Effect[] {
  if (!after) return [];
  const was = pending(before);
  const now = pending(after);
  const out: Effect[] = [];
  for (const [id, item] of now) if (!was.has(id)) out.push({ type: "runway.store", bucket: APPROVALS_BUCKET, key: keyOf(after.tenant, id), value: item });
  for (const id of was.keys()) if (!now.has(id)) out.push({ type: "runway.store", bucket: APPROVALS_BUCKET, key: keyOf(after.tenant, id), value: null });
  return out;
}

/** The tenant's pending approvals, soonest deadline first, filtered by reviewer group (its escalation group counts) and deadline. */
export async function listInbox(
  nc: NatsConnection,
  tenant: string,
  filter: { group?: string; expires_before?: number; run?: string } = {},
): Promise<InboxItem[]> {
  const kv = await new Kvm(nc).open(APPROVALS_BUCKET);
  const out: InboxItem[] = [];
  for await (const key of await kv.keys(`${tenant}.*`)) {
    const e = await kv.get(key);
    if (!e || e.operation !== "PUT" || e.length === 0) continue;
    const item = e.json<InboxItem>();
    if (filter.group && item.group !== filter.group && item.escalation_group !== filter.group) continue;
    if (filter.expires_before !== undefined && item.expires_at >= filter.expires_before) continue;
    if (filter.run && item.run !== filter.run) continue;
    out.push(item);
  }
  return out.sort((a, b) => a.expires_at - b.expires_at);
}

/** One pending approval by id. */
export async function getInboxItem(nc: NatsConnection, tenant: string, id: string): Promise<InboxItem | undefined> {
  const e = await (await new Kvm(nc).open(APPROVALS_BUCKET)).get(keyOf(tenant, id));
  return e && e.operation === "PUT" && e.length > 0 ? e.json<InboxItem>() : undefined;
}
