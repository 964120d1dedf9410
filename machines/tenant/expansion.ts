import { admitExpansion, type AdmissionCode } from "../scheduler/index.js";
import type { ExpansionAnswer } from "./events.js";
import type { Decision, TenantContext } from "./context.js";
import { TenantSettingsSchema } from "./settings.js";
import { reservationKey, type FactReader, type Reservation, type StoreOp } from "./members.js";

/**
 * A map's fan-out is admitted by the run's tenant before any item starts, against its expansion
 * limits and its tenant-wide active-descendant quota; the items stay counted until the run
 * releases them. Idempotent per (run, node): the reservation's key says whether it is held.
 */
export interface ExpansionAsk {
  run_id: string;
  node: string;
  children: number;
  depth: number;
  total_steps: number;
  estimated_cost: number;
}

/** The limits of a tenant stored before expansion limits existed. */
const DEFAULT_LIMITS = TenantSettingsSchema.parse({}).expansion_limits;

interface Io {
  facts: FactReader;
  store: StoreOp[];
}

/**
 * Admits (or refuses) a run's expansion against the tenant's expansion limits. The reservation
 * is the key `x.<run>.<node>` (its item count) beside the record; the record keeps only the sum,
 * `active_descendants`. A reservation already held is answered again (`duplicate`).
 */
export function admitExpansionDecision(context: TenantContext, ask: ExpansionAsk, now: number, io: Io): Decision<ExpansionAnswer> {
  const { run_id, node } = ask;
  const active = context.active_descendants;
  const held = io.facts.get<Reservation>(reservationKey(run_id, node));
  if (held) {
    return {
      context,
      answer: { outcome: "expansion_admitted", run_id, node, children: held.c, active_descendants: active, duplicate: true },
      reply: { run: run_id, event: { type: "expansion.admitted", node } },
    };
  }
  const limits = context.settings.expansion_limits ?? DEFAULT_LIMITS;
  const request = {
    children: ask.children,
    depth: ask.depth,
    total_steps: ask.total_steps,
    estimated_cost: ask.estimated_cost,
    tenant_active_descendants: active + ask.children,
  };
  const verdict = admitExpansion(request, limits);
  if (!verdict.ok) {
    const [value, limit] = FIGURES[verdict.code](request, limits);
    const message = `${verdict.code}: ${value} over the tenant's limit of ${limit}`;
    return {
      context,
      answer: { outcome: "expansion_refused", run_id, node, code: verdict.code, limit, value },
      reply: { run: run_id, event: { type: "expansion.refused", node, code: verdict.code, message } },
    };
  }
  io.store.push({ key: reservationKey(run_id, node), value: { c: ask.children } satisfies Reservation });
  const next: TenantContext = { ...context, active_descendants: active + ask.children, updated_at: now };
  return {
    context: next,
    answer: { outcome: "expansion_admitted", run_id, node, children: ask.children, active_descendants: next.active_descendants, duplicate: false },
    reply: { run: run_id, event: { type: "expansion.admitted", node } },
  };
}

export function releaseExpansionDecision(context: TenantContext, ref: { run_id: string; node: string }, now: number, io: Io): Decision<ExpansionAnswer> {
  const { run_id, node } = ref;
  const held = io.facts.get<Reservation>(reservationKey(run_id, node));
  if (!held) return { context, answer: { outcome: "not_held", run_id, node } };
  io.store.push({ key: reservationKey(run_id, node), value: null });
  const active = Math.max(0, context.active_descendants - held.c);
  return {
    context: { ...context, active_descendants: active, updated_at: now },
    answer: { outcome: "expansion_released", run_id, node, active_descendants: active },
  };
}

type Figures = (
  r: { children: number; depth: number; total_steps: number; estimated_cost: number; tenant_active_descendants: number },
  l: { max_children: number; max_depth: number; max_total_steps: number; max_estimated_cost: number; max_active_descendants: number },
) => [number, number];
const FIGURES: Record<AdmissionCode, Figures> = {
  too_many_children: (r, l) => [r.children, l.max_children],
  depth_exceeded: (r, l) => [r.depth, l.max_depth],
  too_many_steps: (r, l) => [r.total_steps, l.max_total_steps],
  budget_exceeded: (r, l) => [r.estimated_cost, l.max_estimated_cost],
  descendant_quota_exceeded: (r, l) => [r.tenant_active_descendants, l.max_active_descendants],
};
