import type { NatsConnection } from "@nats-io/transport-node";
import { Kvm, type KV } from "@nats-io/kv";
import { z } from "zod";
import { canonicalJson, compileDefinition, MAX_DEPTH, PlanSchema, WorkflowNameSchema, type CompileError, type Plan } from "../../machines/index.js";
import { isRemoval, kvSubject, payloadLimit, readLast, RunwayFault } from "../../runtime/index.js";
import { sha256Hex } from "../records/index.js";

/** The definitions bucket: `<tenant>.<name>.v<N>`, `.latest`, `.draft`, `.disabled`; `plan.<digest>`. */
export const DEFINITIONS_BUCKET = "rw_defs";

const RefSchema = z.object({ name: z.string(), version: z.number().int().positive(), digest: z.string() });
export type DefinitionRef = z.infer<typeof RefSchema>;

const VersionRecordSchema = z.object({
  name: z.string(),
  version: z.number().int().positive(),
  digest: z.string(),
  status: z.literal("published"),
  definition: z.unknown(),
  published_at: z.number(),
});
const PlanRecordSchema = z.object({ plan: PlanSchema, children: z.record(z.string(), RefSchema) });
const DraftRecordSchema = z.object({ name: z.string(), definition: z.unknown(), saved_at: z.number() });

/** Room left in a message for the headers a KV write adds (expected-sequence and the like). */
const KV_HEADER_MARGIN = 1024;

export type PutDefinitionResult =
  | { outcome: "published"; name: string; version: number; digest: string }
  | { outcome: "unchanged"; name: string; version: number; digest: string }
  | { outcome: "draft_saved"; name: string }
  | { outcome: "invalid_definition"; errors: CompileError[] };

export type ResolveResult =
  | { outcome: "found"; ref: DefinitionRef; plan: Plan; children: Record<string, DefinitionRef> }
  | { outcome: "definition_not_found" }
  | { outcome: "definition_not_published"; reason: string };

export type DisableResult =
  { outcome: "disabled" | "enabled"; name: string } | { outcome: "definition_not_found" } | { outcome: "definition_not_published"; reason: string };

/** Names whose last resolved version a node remembers (the least recently resolved go first). */
const LATEST_SEEN_LIMIT = 10_000;

export interface CompiledPlan {
  plan: Plan;
  children: Record<string, DefinitionRef>;
}

/**
 * Versioned workflow definitions, per tenant. A published version is immutable and
 * content-addressed: its digest covers the compiled plan and the pinned versions of the
 * workflows it starts as children, and a run pins the digest. Keys (bucket `rw_defs`):
 * `<tenant>.<name>.v<N>` (version record), `<tenant>.<name>.latest` (pointer), `<tenant>.<name>.draft`,
 * `plan.<digest>` (the compiled plan, shared by identical versions), `<tenant>.<name>.disabled`
 * (present while the definition is disabled).
 */
export class DefinitionStore {
  private kv: KV | undefined;
  private readonly plans = new Map<string, CompiledPlan>();
  /** Plans being read: every caller that misses the cache meanwhile waits for the same read. */
  private readonly loadingPlans = new Map<string, Promise<CompiledPlan>>();
  /** The latest version each name resolved to here, most recent last (a guess, see `lastResolved`). */
  private readonly latestSeen = new Map<string, Extract<ResolveResult, { outcome: "found" }>>();

  constructor(
    private readonly nc: NatsConnection,
    private readonly handlers: () => ReadonlySet<string>,
  ) {}

  private async bucket(): Promise<KV> {
    this.kv ??= await new Kvm(this.nc).open(DEFINITIONS_BUCKET);
    return this.kv;
  }

  /**
   * The `latest` pointer, read on every start that names no version: from the stream leader
   * (a replica's direct get could lag a publish just answered), as one raw request.
   */
  private async latest(tenant: string, name: string): Promise<{ ref: DefinitionRef; revision: number } | undefined> {
    const read = await readLast(this.nc, `KV_${DEFINITIONS_BUCKET}`, kvSubject(DEFINITIONS_BUCKET, `${tenant}.${name}.latest`));
    if (read.outcome === "unavailable") throw new RunwayFault("store_unavailable", `definition ${name}: ${read.detail}`, { kind: "retryable" });
    if (read.outcome === "missing") return undefined;
    if (isRemoval(read.message)) return undefined;
    return { ref: RefSchema.parse(JSON.parse(new TextDecoder().decode(read.message.data))), revision: read.message.seq };
  }

  async put(tenant: string, raw: unknown, options: { publish: boolean; now: number }): Promise<PutDefinitionResult> {
    const kv = await this.bucket();
    // Every child workflow is pinned to its latest published version at publish time.
    const children: Record<string, DefinitionRef> = {};
    for (const child of subworkflowNames(raw)) {
      const found = await this.latest(tenant, child);
      if (found) children[child] = found.ref;
    }
    const compiled = compileDefinition(raw, { handlers: this.handlers(), workflowExists: (child) => children[child] !== undefined });
    if (!compiled.ok) return { outcome: "invalid_definition", errors: compiled.errors };
    const plan = compiled.plan;
    const delegation = this.checkSubagents(plan, children);
    if (delegation.length > 0) return { outcome: "invalid_definition", errors: delegation };
    if (!options.publish) {
      const draft = JSON.stringify({ name: plan.name, definition: raw, saved_at: options.now });
      const refused = this.tooLarge("draft", draft);
      if (refused) return refused;
      await kv.put(`${tenant}.${plan.name}.draft`, draft);
      return { outcome: "draft_saved", name: plan.name };
    }
    // The pinned children are known now, so a tree deeper than a run may grow is refused here
    // rather than failing its deepest node at run time.
    const levels = 1 + (await this.deepestChain(Object.values(children), MAX_DEPTH + 1));
    if (levels > MAX_DEPTH + 1) {
      return {
        outcome: "invalid_definition",
        errors: [
          {
            code: "depth_exceeded",
            path: "nodes",
            message: `its subworkflows nest ${levels} runs deep (this one included) through the pinned versions; a run tree allows ${MAX_DEPTH + 1}`,
          },
        ],
      };
    }
    const digest = sha256Hex(plan.definition_digest_input + canonicalJson(children));
    const planRecord = JSON.stringify({ plan, children });
    // Checked before anything is written: a version record with no plan, or no version for a stored plan, helps no one.
    const refused = this.tooLarge("plan", planRecord) ?? this.tooLarge("version", versionRecord(plan.name, Number.MAX_SAFE_INTEGER, digest, raw, options.now));
    if (refused) return refused;
    for (let attempt = 0; attempt < 8; attempt++) {
      const current = await this.latest(tenant, plan.name);
      if (current && current.ref.digest === digest) return { outcome: "unchanged", ...current.ref };
      const version = (current?.ref.version ?? 0) + 1;
      await kv.put(`plan.${digest}`, planRecord);
      const ref = { name: plan.name, version, digest };
      try {
        await kv.create(`${tenant}.${plan.name}.v${version}`, versionRecord(plan.name, version, digest, raw, options.now));
      } catch (err) {
        // The version exists: another publisher took the number, or a publish stored it and then
        // died (or lost its pointer update) before moving `latest`. Either way the pointer lags a
        // published version: move it there, and look again from the new latest.
        const taken = await kv.get(`${tenant}.${plan.name}.v${version}`);
        if (!taken || taken.operation !== "PUT")
          throw new RunwayFault("store_unavailable", `publish of ${plan.name} v${version}: ${String(err)}`, { kind: "retryable", cause: err });
        const stored = VersionRecordSchema.parse(taken.json());
        const storedRef = { name: stored.name, version: stored.version, digest: stored.digest };
        await this.advance(tenant, storedRef, current?.revision);
        // A put of the definition whose publish was cut short finishes it.
        if (stored.digest === digest) return { outcome: "published", ...storedRef };
        continue;
      }
      await this.advance(tenant, ref, current?.revision);
      return { outcome: "published", ...ref };
    }
    throw new RunwayFault("publish_contended", `could not publish ${plan.name}: too many concurrent publishers`, { kind: "retryable" });
  }

  /**
   * Moves `<tenant>.<name>.latest` to `ref` if it still stands at `revision` (absent: not created
   * yet). Losing that race is fine when the pointer already names `ref` or a later version (a
   * concurrent publisher moved it); otherwise the version is stored but not yet latest, and the
   * put fails retryable: putting it again finishes the move (see `put`).
   */
  private async advance(tenant: string, ref: DefinitionRef, revision: number | undefined): Promise<void> {
    const kv = await this.bucket();
    const key = `${tenant}.${ref.name}.latest`;
    try {
      if (revision !== undefined) await kv.update(key, JSON.stringify(ref), revision);
      else await kv.create(key, JSON.stringify(ref));
      return;
    } catch (err) {
      const now = await this.latest(tenant, ref.name).catch(() => undefined);
      if (now && now.ref.version >= ref.version) return;
      throw new RunwayFault("publish_incomplete", `${ref.name} v${ref.version} is stored but not yet latest (put it again to finish): ${String(err)}`, {
        kind: "retryable",
        cause: err,
      });
    }
  }

  /** A record that would not fit in one message of the connected server, as a closed answer. */
  private tooLarge(what: string, record: string): PutDefinitionResult | undefined {
    const bytes = Buffer.byteLength(record);
    const limit = payloadLimit(this.nc) - KV_HEADER_MARGIN;
    if (bytes <= limit) return undefined;
    return {
      outcome: "invalid_definition",
      errors: [
        {
          code: "definition_too_large",
          path: "definition",
          message: `its ${what} record is ${bytes} bytes; the server stores at most ${limit} in one message`,
        },
      ],
    };
  }

  /**
   * Disables or enables a published definition. Disabled, it refuses new top-level starts (every
   * version); the runs it has go on, and a child its pinned parent starts is created as before
   * (children are pinned in their parent's plan and never resolved here): disable stops new run
   * trees, not the work of trees already admitted.
   */
  async setDisabled(tenant: string, name: string, disabled: boolean): Promise<DisableResult> {
    const kv = await this.bucket();
    if (!(await this.latest(tenant, name))) {
      const draft = await kv.get(`${tenant}.${name}.draft`);
      if (draft && draft.operation === "PUT") return { outcome: "definition_not_published", reason: `${name} is a draft` };
      return { outcome: "definition_not_found" };
    }
    if (disabled) await kv.put(`${tenant}.${name}.disabled`, JSON.stringify({ disabled: true }));
    else await kv.delete(`${tenant}.${name}.disabled`);
    return { outcome: disabled ? "disabled" : "enabled", name };
  }

  /** Whether `name` is disabled, read from the stream leader (a start just after a disable must see it). */
  private async disabled(tenant: string, name: string): Promise<boolean> {
    const read = await readLast(this.nc, `KV_${DEFINITIONS_BUCKET}`, kvSubject(DEFINITIONS_BUCKET, `${tenant}.${name}.disabled`));
    if (read.outcome === "unavailable") throw new RunwayFault("store_unavailable", `definition ${name}: ${read.detail}`, { kind: "retryable" });
    return read.outcome === "found" && !isRemoval(read.message);
  }

  /**
   * The version a start should pin: the latest published (or the named version). Another
   * tenant's definition answers exactly like a missing one; a draft or a disabled definition is
   * not published.
   */
  async resolve(tenant: string, name: string, version?: number): Promise<ResolveResult> {
    const kv = await this.bucket();
    let ref: DefinitionRef | undefined;
    // Read beside the version, so a start waits for one round trip, not two.
    const disabled = this.disabled(tenant, name);
    disabled.catch(() => undefined);
    if (version !== undefined) {
      const e = await kv.get(`${tenant}.${name}.v${version}`);
      if (e && e.operation === "PUT") {
        const rec = VersionRecordSchema.parse(e.json());
        ref = { name: rec.name, version: rec.version, digest: rec.digest };
      }
    } else {
      ref = (await this.latest(tenant, name))?.ref;
    }
    if (!ref) {
      const draft = await kv.get(`${tenant}.${name}.draft`);
      if (draft && draft.operation === "PUT") return { outcome: "definition_not_published", reason: `${name} is a draft` };
      return { outcome: "definition_not_found" };
    }
    if (await disabled) return { outcome: "definition_not_published", reason: `${name} is disabled` };
    const compiled = await this.planOf(ref.digest);
    const found = { outcome: "found" as const, ref, plan: compiled.plan, children: compiled.children };
    if (version === undefined) this.remember(`${tenant}\u0000${name}`, found);
    return found;
  }

  /**
   * What `resolve(tenant, name)` last answered on this node: a guess a caller may act on while it
   * reads the latest version, and must check against what it reads.
   */
  lastResolved(tenant: string, name: string): Extract<ResolveResult, { outcome: "found" }> | undefined {
    return this.latestSeen.get(`${tenant}\u0000${name}`);
  }

  private remember(key: string, found: Extract<ResolveResult, { outcome: "found" }>): void {
    this.latestSeen.delete(key);
    this.latestSeen.set(key, found);
    if (this.latestSeen.size > LATEST_SEEN_LIMIT) this.latestSeen.delete(this.latestSeen.keys().next().value!);
  }

  /**
   * An agent node's subagents: each is published (pinned like a subworkflow). What tools a
   * delegate may use is decided at run time: its own within its delegator's (the run's `tool_scope`).
   */
  private checkSubagents(plan: Plan, children: Record<string, DefinitionRef>): CompileError[] {
    const errors: CompileError[] = [];
    for (const [i, node] of plan.nodes.entries()) {
      const agents = node.kind === "code" ? (node.agent?.agents ?? []) : [];
      for (const [j, name] of agents.entries())
        if (!children[name]) errors.push({ code: "unknown_workflow", path: `nodes[${i}].agents[${j}]`, message: `no published workflow named '${name}'` });
    }
    return errors;
  }

  /**
   * How many runs deep the pinned workflows `refs` nest (0 for none), looked at no further than
   * `limit` levels. Pins only name versions published earlier, so the chain always ends.
   */
  private async deepestChain(refs: DefinitionRef[], limit: number): Promise<number> {
    if (refs.length === 0) return 0;
    if (limit <= 0) return 1;
    let deepest = 0;
    for (const ref of refs) {
      const child = await this.planOf(ref.digest);
      deepest = Math.max(deepest, 1 + (await this.deepestChain(Object.values(child.children), limit - 1)));
    }
    return deepest;
  }

  /**
   * The compiled plan of a digest; immutable, so cached for the life of the process. Read once
   * however many ask at the same time (a node that claims partitions loads hundreds of runs of the
   * same definition at once: each read and parse of the plan took the CPU their recovery needs).
   */
  async planOf(digest: string): Promise<CompiledPlan> {
    const cached = this.plans.get(digest);
    if (cached) return cached;
    let loading = this.loadingPlans.get(digest);
    if (!loading) {
      loading = this.readPlan(digest).finally(() => this.loadingPlans.delete(digest));
      this.loadingPlans.set(digest, loading);
    }
    return loading;
  }

  private async readPlan(digest: string): Promise<CompiledPlan> {
    let e;
    try {
      e = await (await this.bucket()).get(`plan.${digest}`);
    } catch (err) {
      throw new RunwayFault("store_unavailable", `plan ${digest}: ${String(err)}`, { kind: "retryable" });
    }
    if (!e || e.operation !== "PUT") throw new RunwayFault("plan_not_found", `no plan with digest ${digest}`);
    const record = PlanRecordSchema.parse(e.json()) as CompiledPlan;
    this.plans.set(digest, record);
    return record;
  }

  async get(
    tenant: string,
    name: string,
    version?: number,
  ): Promise<
    | { outcome: "found"; ref: DefinitionRef; definition: unknown; published_at: number }
    | { outcome: "definition_not_found" }
    | { outcome: "definition_not_published"; reason: string; definition: unknown }
  > {
    const kv = await this.bucket();
    const v = version ?? (await this.latest(tenant, name))?.ref.version;
    if (v !== undefined) {
      const e = await kv.get(`${tenant}.${name}.v${v}`);
      if (e && e.operation === "PUT") {
        const rec = VersionRecordSchema.parse(e.json());
        return {
          outcome: "found",
          ref: { name: rec.name, version: rec.version, digest: rec.digest },
          definition: rec.definition,
          published_at: rec.published_at,
        };
      }
    }
    const draft = await kv.get(`${tenant}.${name}.draft`);
    if (version === undefined && draft && draft.operation === "PUT") {
      const rec = DraftRecordSchema.parse(draft.json());
      return { outcome: "definition_not_published", reason: `${name} is a draft`, definition: rec.definition };
    }
    return { outcome: "definition_not_found" };
  }

  async list(tenant: string): Promise<DefinitionRef[]> {
    const kv = await this.bucket();
    const out: DefinitionRef[] = [];
    for await (const key of await kv.keys(`${tenant}.*.latest`)) {
      const e = await kv.get(key);
      if (e && e.operation === "PUT") out.push(RefSchema.parse(e.json()));
    }
    return out.sort((a, b) => a.name.localeCompare(b.name));
  }
}

function versionRecord(name: string, version: number, digest: string, raw: unknown, now: number): string {
  return JSON.stringify({ name, version, digest, status: "published", definition: raw, published_at: now });
}

/**
 * The valid workflow names `raw` gives as subworkflows (an invalid one is the compiler's to
 * report, and no key to look up). `raw` is not validated yet, nor its depth: walked without
 * recursion.
 */
function subworkflowNames(raw: unknown): string[] {
  const out = new Set<string>();
  const todo: unknown[] = [raw];
  for (let v = todo.pop(); v !== undefined; v = todo.pop()) {
    if (!v || typeof v !== "object") continue;
    const o = v as Record<string, unknown>;
    if (!Array.isArray(v) && o.kind === "subworkflow" && WorkflowNameSchema.safeParse(o.workflow).success) out.add(o.workflow as string);
    if (!Array.isArray(v) && o.kind === "agent" && Array.isArray(o.agents))
      for (const a of o.agents) if (WorkflowNameSchema.safeParse(a).success) out.add(a as string);
    for (const child of Object.values(o)) todo.push(child);
  }
  return [...out];
}
