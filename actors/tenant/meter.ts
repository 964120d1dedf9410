import type { NatsConnection } from "@nats-io/transport-node";
import { incrementCounter, incrementCounterOnce, readLast } from "../../runtime/index.js";
import { utcDay } from "../../machines/index.js";

export const METER_STREAM = "RUNWAY_METER";

/** What a metered call was told before it was made. */
export type Charge =
  | { outcome: "charged" }
  /** The tree's money ceiling would be passed: nothing was charged, the call is not made. */
  | { outcome: "budget_exhausted"; spent_cents: number; ceiling_cents: number }
  /** The meter could not be read or written: a fault, never a spent budget (the attempt fails retryable). */
  | { outcome: "unavailable"; detail: string };

export interface ChargeRequest {
  tenant: string;
  /** The run tree's root: its money ceiling is shared by the whole tree. */
  root: string;
  /** The tree's ceiling (its root's `limits.max_cost_cents`); absent: only the tenant's day is metered. */
  ceiling_cents?: number;
  cents: number;
  now: number;
}

/**
 * The usage meter: cents spent, on JetStream counters (`Nats-Incr`) per run tree and per tenant UTC
 * day. A call is charged before it is made and a total past the ceiling is taken back and refused, so
 * concurrent calls of one tree never overspend together. A charge whose call is then not made stays
 * spent: the meter errs towards less money, never more.
 */
export class UsageMeter {
  constructor(private readonly nc: NatsConnection) {}

  async charge(c: ChargeRequest): Promise<Charge> {
    if (c.cents <= 0) return { outcome: "charged" };
    if (c.ceiling_cents !== undefined) {
      const tree = treeSubject(c.tenant, c.root);
      const total = await incrementCounter(this.nc, tree, c.cents);
      if (typeof total === "string") return { outcome: "unavailable", detail: total };
      if (total > c.ceiling_cents) {
        const back = await incrementCounter(this.nc, tree, -c.cents);
        if (typeof back === "string") return { outcome: "unavailable", detail: back };
        return { outcome: "budget_exhausted", spent_cents: total - c.cents, ceiling_cents: c.ceiling_cents };
      }
    }
    const day = await incrementCounter(this.nc, daySubject(c.tenant, utcDay(c.now)), c.cents);
    return typeof day === "string" ? { outcome: "unavailable", detail: day } : { outcome: "charged" };
  }

  /**
   * Reserves `cents` of the tree's ceiling for the effect `key` (an agent's model turn) before it is
   * asked: refused `budget_exhausted` (and taken back) when the tree's total would pass the ceiling.
   * Keyed: a second reservation for the same key (an attempt after a crash) adds nothing and is
   * `charged`, the first one still holding. The day is charged at `settle`, with what was spent.
   */
  async reserve(c: ChargeRequest & { key: string }): Promise<Charge> {
    if (c.cents <= 0 || c.ceiling_cents === undefined) return { outcome: "charged" };
    const tree = treeSubject(c.tenant, c.root);
    const added = await incrementCounterOnce(this.nc, tree, c.cents, `${c.key}:reserve`);
    if (added.outcome === "unavailable") return { outcome: "unavailable", detail: added.detail };
    if (added.outcome === "duplicate" || added.total <= c.ceiling_cents) return { outcome: "charged" };
    const back = await incrementCounterOnce(this.nc, tree, -c.cents, `${c.key}:reserve-back`);
    if (back.outcome === "unavailable") return { outcome: "unavailable", detail: back.detail };
    return { outcome: "budget_exhausted", spent_cents: added.total - c.cents, ceiling_cents: c.ceiling_cents };
  }

  /**
   * Settles the reservation of `key` to what the effect cost (`cents`): the tree gets the difference
   * (usually back), the tenant's day the cost. Keyed like `reserve`, so a settlement done twice
   * (inside the meter's duplicate window) counts once.
   */
  async settle(
    c: Omit<ChargeRequest, "cents"> & { key: string; reserved_cents: number; cents: number },
  ): Promise<{ outcome: "settled" } | { outcome: "unavailable"; detail: string }> {
    const delta = c.cents - (c.ceiling_cents === undefined ? 0 : c.reserved_cents);
    if (delta !== 0 && c.ceiling_cents !== undefined) {
      const tree = await incrementCounterOnce(this.nc, treeSubject(c.tenant, c.root), delta, `${c.key}:settle`);
      if (tree.outcome === "unavailable") return tree;
    }
    if (c.cents > 0) {
      const day = await incrementCounterOnce(this.nc, daySubject(c.tenant, utcDay(c.now)), c.cents, `${c.key}:day`);
      if (day.outcome === "unavailable") return day;
    }
    return { outcome: "settled" };
  }

  /** Cents a tenant's runs spent on UTC day `day`. */
  spentOn(tenant: string, day: string): Promise<number> {
    return this.total(daySubject(tenant, day));
  }

  /** Cents a run tree spent. */
  spentByTree(tenant: string, root: string): Promise<number> {
    return this.total(treeSubject(tenant, root));
  }

  private async total(subject: string): Promise<number> {
    const read = await readLast(this.nc, METER_STREAM, subject);
    if (read.outcome === "missing") return 0;
    if (read.outcome !== "found") throw new Error(`meter ${subject}: ${read.detail}`);
    return Number((JSON.parse(new TextDecoder().decode(read.message.data)) as { val?: string }).val ?? 0);
  }
}

const treeSubject = (tenant: string, root: string): string => `rw.meter.${tenant}.tree.${root}`;
const daySubject = (tenant: string, day: string): string => `rw.meter.${tenant}.day.${day}`;

/** The meter's stream: counters only; a tree's or a day's total is kept 35 days. */
export function meterStreamConfig(replicas: number) {
  return {
    name: METER_STREAM,
    description: "Runway usage meter (cents): rw.meter.<tenant>.tree.<root>, rw.meter.<tenant>.day.<YYYY-MM-DD>",
    subjects: ["rw.meter.>"],
    max_age: 35 * 86_400 * 1_000_000_000,
    num_replicas: replicas,
    allow_msg_counter: true,
  };
}
