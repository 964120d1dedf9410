import type { NatsConnection } from "@nats-io/transport-node";
import { Kvm } from "@nats-io/kv";
import { ADMISSION, type ApprovalState, type RunContext } from "../../machines/index.js";
import type { Effect } from "../../runtime/index.js";
import { sha256Hex, listedValues } from "../records/index.js";

/** Bucket of the reviewers' inbox: one key per pending approval, `<tenant>.<hash of its id>`. */
export const APPROVALS_BUCKET = "rw_approvals";

/**
 * A pending approval as the inbox lists it. `kind`: `node` (an approval node), `tool` (a gated call;
 * payload `{server, tool, arguments}`, which an edit replaces), `input` (a server's forms, MCP
 * 2026-07-28; approve answers them, reject declines) or `admission` (the run waits to be admitted;
 * `node` is `(admission)`).
 */
export type InboxItem = Omit<Extract<ApprovalState, { state: "pending" }>, "state"> & {
  run: string;
  node: string;
  kind: "node" | "tool" | "input" | "admission";
};

function keyOf(tenant: string, id: string): string {
  return `${tenant}.${sha256Hex(id).slice(0, 32)}`;
}

function pendingOf(approval: ApprovalState | undefined): Extract<ApprovalState, { state: "pending" }> | undefined {
  return approval?.state === "pending" ? approval : undefined;
}

function inboxItem(run: RunContext, node: string, kind: InboxItem["kind"], approval: Extract<ApprovalState, { state: "pending" }>): InboxItem {
  const { state: _state, ...request } = approval;
  return { ...request, run: run.id, node, kind };
}

/**
 * The inbox entries a run transition opens and closes (the run actor's `effects` hook), like the
 * reconciliation index. A transition replaces an approval it changes, never edits it, so only the
 * approvals whose object changed are compared: a transition that touches none costs a walk of the
 * head's nodes and allocates nothing.
 */
export function inboxEffects(before: RunContext | null | undefined, after: RunContext | null | undefined): Effect[] {
  if (!after) return [];
  const out: Effect[] = [];
  // A head holds every node of its plan from its create on: none leaves it.
  for (const node in after.nodes) compareInbox(out, after, node, false, before?.nodes[node]?.approval, after.nodes[node]!.approval);
  compareInbox(out, after, ADMISSION, true, before?.admission_approval, after.admission_approval);
  return out;
}

/** The inbox entries one approval's change adds and removes (a function of its own: no closure per transition). */
function compareInbox(
  out: Effect[],
  after: RunContext,
  node: string,
  admission: boolean,
  was: ApprovalState | undefined,
  now: ApprovalState | undefined,
): void {
  if (was === now) return;
  const closed = pendingOf(was);
  const open = pendingOf(now);
  const kind = admission ? "admission" : open?.input ? "input" : open?.tool ? "tool" : "node";
  if (open && open.id !== closed?.id)
    out.push({ type: "runway.store", bucket: APPROVALS_BUCKET, key: keyOf(after.tenant, open.id), value: inboxItem(after, node, kind, open) });
  if (closed && closed.id !== open?.id) out.push({ type: "runway.store", bucket: APPROVALS_BUCKET, key: keyOf(after.tenant, closed.id), value: null });
}

/** A page of the inbox; `next_cursor` (null: the last page) is what to pass as `cursor` for the next. */
export interface InboxPage {
  approvals: InboxItem[];
  next_cursor: string | null;
}

/** Items a page holds by default, and at most: an item is a few hundred bytes, a reply at most 1 MiB. */
export const INBOX_PAGE = 100;
export const INBOX_PAGE_MAX = 500;

/**
 * The tenant's pending approvals, soonest deadline first (then by id), filtered by reviewer group
 * (its escalation group counts), deadline and run: one read of the tenant's inbox keys (their last
 * values), then a page of at most `limit` from after `cursor` (`<expires_at>:<id>` of the last item
 * seen), so a reply stays bounded whatever the inbox holds.
 */
export async function listInbox(
  nc: NatsConnection,
  tenant: string,
  filter: { group?: string; expires_before?: number; run?: string } = {},
  page: { limit?: number; cursor?: string } = {},
): Promise<InboxPage> {
  const all: InboxItem[] = [];
  for (const v of await listedValues(nc, APPROVALS_BUCKET, `${tenant}.*`)) {
    if (v.data.length === 0) continue;
    const item = JSON.parse(new TextDecoder().decode(v.data)) as InboxItem;
    if (filter.group && item.group !== filter.group && item.escalation_group !== filter.group) continue;
    if (filter.expires_before !== undefined && item.expires_at >= filter.expires_before) continue;
    if (filter.run && item.run !== filter.run) continue;
    all.push(item);
  }
  all.sort((a, b) => a.expires_at - b.expires_at || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const after = page.cursor === undefined ? undefined : parseCursor(page.cursor);
  const from = after ? all.findIndex((i) => i.expires_at > after.at || (i.expires_at === after.at && i.id > after.id)) : 0;
  const limit = Math.min(page.limit ?? INBOX_PAGE, INBOX_PAGE_MAX);
  const approvals = from < 0 ? [] : all.slice(from, from + limit);
  const last = approvals.at(-1);
  return { approvals, next_cursor: last && from + limit < all.length ? `${last.expires_at}:${last.id}` : null };
}

/** `<expires_at>:<id>`; anything else reads as no cursor's position (the API validates its shape). */
function parseCursor(cursor: string): { at: number; id: string } | undefined {
  const i = cursor.indexOf(":");
  const at = Number(cursor.slice(0, i));
  return i > 0 && Number.isInteger(at) ? { at, id: cursor.slice(i + 1) } : undefined;
}

/** One pending approval by id. */
export async function getInboxItem(nc: NatsConnection, tenant: string, id: string): Promise<InboxItem | undefined> {
  const e = await (await new Kvm(nc).open(APPROVALS_BUCKET)).get(keyOf(tenant, id));
  return e && e.operation === "PUT" && e.length > 0 ? e.json<InboxItem>() : undefined;
}

/**
 * The inbox item a run waits on, as its `waiting.ref` names it. The item is stored just after the
 * run's record (a store effect of the same transition), so a reader woken by the run's
 * `run_waiting` event can come first: it is asked again, up to 5 times 20 ms apart, before it is
 * taken as gone.
 */
export async function awaitedInboxItem(nc: NatsConnection, tenant: string, id: string): Promise<InboxItem | undefined> {
  for (let tries = 1; ; tries++) {
    const item = await getInboxItem(nc, tenant, id);
    if (item || tries === 5) return item;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
