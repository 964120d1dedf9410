import { heldForAdmission, validateAgainstSchema } from "../../machines/index.js";
import type { DefinitionStore } from "../../actors/index.js";
import type { TenantReply, TenantService } from "./tenant-service.js";

type Answer = TenantReply<"tenant.admit_run">;

/** A start's admission asked on a guess of its plan: which run, and the ceiling it reserved under. */
export interface EarlyAdmission {
  tenant: string;
  id: string;
  project: string;
  ceiling: number | undefined;
  admission: Promise<Answer>;
}

/**
 * A start without a start key (its id is new: there is nothing to find first) is admitted on
 * the plan this node last resolved for the name while the latest version is read: one round
 * trip less before its answer. Admission reads a plan for two things only, its cost ceiling and
 * whether a person admits the run first, so the start keeps this admission when the version it
 * reads agrees on both (`use`), and gives it back otherwise (`giveBack`).
 */
export class EarlyAdmissions {
  /** Starts admitted early, and early admissions given back (metrics). */
  readonly stats = { admittedEarly: 0, givenBack: 0 };

  constructor(private readonly deps: { definitions: DefinitionStore; tenants: TenantService }) {}

  /**
   * Admits `id` on the guessed plan. Not tried for a pinned version, nor when the guess would
   * refuse the start anyway (the caller has checked the input's size and the lane).
   */
  admit(
    tenant: string,
    id: string,
    project: string,
    request: { definition: string; version?: number; replay_of?: string },
    input: unknown,
  ): EarlyAdmission | undefined {
    if (request.version !== undefined) return undefined;
    const guess = this.deps.definitions.lastResolved(tenant, request.definition);
    if (!guess || heldForAdmission(guess.plan, { parent_run_id: null, replay_of: request.replay_of })) return undefined;
    if (guess.plan.input_schema && !validateAgainstSchema(guess.plan.input_schema, input).ok) return undefined;
    const ceiling = guess.plan.limits?.max_cost_cents;
    return { tenant, id, project, ceiling, admission: this.deps.tenants.admit(tenant, id, project, ceiling, true) };
  }

  /** Whether the version read admits on the terms `early` was admitted under. */
  agrees(early: EarlyAdmission | undefined, terms: { held: boolean; ceiling: number | undefined }): early is EarlyAdmission {
    return early !== undefined && !terms.held && early.ceiling === terms.ceiling;
  }

  /** The early admission, as the start's own. */
  use(early: EarlyAdmission): Promise<Answer> {
    return early.admission.then((a) => (this.stats.admittedEarly++, a));
  }

  /** The slot an early admission took, back to its tenant (no run will have that id): not one of the day's starts either. */
  async giveBack(early: EarlyAdmission | undefined): Promise<void> {
    if (!early) return;
    const admitted = await early.admission.catch(() => undefined);
    if (admitted?.outcome !== "admitted" && admitted?.outcome !== "queued") return;
    this.stats.givenBack++;
    await this.deps.tenants.runEnded(early.tenant, early.id, early.project).catch(() => undefined);
  }
}
