/**
 * Applying one command to a tenant: the dispatch to its decision (decide.ts), the wait while an
 * older-format record's members move out (migrate.ts), and the decision turned into effects.
 */
import {
  auditSubject,
  DEFAULT_ENDED_RETENTION_MS,
  type AdmissionRefusedReply,
  type AdmitAnswer,
  type ExpansionReply,
  type MigratingAnswer,
  type PromoteAnswer,
  type TenantAnswer,
  type TenantEffect,
  type TenantEvent,
} from "./events.js";
import { STATE_COMMANDS } from "./table.js";
import type { Decision, TenantContext, TenantContextV1 } from "./context.js";
import { admitExpansionDecision, releaseExpansionDecision } from "./expansion.js";
import { endedKey, FactReader, memberKey, tenantKey } from "./members.js";
import { legacyLeft, migrateChunk, upgrade } from "./migrate.js";
import { admitDecision, createDecision, promoteDecision, recheckDecision, runEndedDecision, settingsDecision, stateDecision, type Io } from "./decide.js";

/** Commands that wait while an older-format record's members are moved out: the caller asks again. */
const ASKED_AGAIN: ReadonlySet<string> = new Set(["tenant.admit_run", "tenant.put", "tenant.resume"]);
/** Commands that wait too, sent back to the tenant's own mailbox (their senders do not wait for an answer). */
const SENT_AGAIN: ReadonlySet<string> = new Set(["tenant.run_ended", "tenant.recheck", "tenant.admit_expansion", "tenant.release_expansion", "tenant.promote"]);

type Applied = { context: TenantContext; effects: TenantEffect[] };

/**
 * The whole decision for one event: the next context and its effects, in order — the answer, the
 * audit record, the membership keys (written after the record), the runs told `run.admitted`, a
 * reply to a run, the commands the tenant sends itself. An older-format record is upgraded first
 * (`migrate.ts`). The machine's action calls it once; `prepare` calls it to learn its facts.
 */
export function applyTenantCommand(stored: TenantContext | TenantContextV1, event: TenantEvent): Applied {
  const current = upgrade(stored);
  const d = decide(current, event);
  const context = d.context === current && !d.store?.length ? (stored as TenantContext) : d.context;
  const effects: TenantEffect[] = [{ type: "runway.answer", value: d.answer }];
  if (d.audit) effects.push({ type: "runway.publish", subject: auditSubject(context.id), data: d.audit });
  for (const op of d.store ?? [])
    effects.push({ type: "runway.store", key: tenantKey(context.id, op.key), value: op.value, ...(op.ttl_ms ? { ttl_ms: op.ttl_ms } : {}) });
  for (const run_id of d.admitted ?? []) effects.push({ type: "runway.send", to: { kind: "run", id: run_id }, event: { type: "run.admitted" } });
  if (d.reply) effects.push({ type: "runway.send", to: { kind: "run", id: d.reply.run }, event: d.reply.event as ExpansionReply | AdmissionRefusedReply });
  for (const event of d.self ?? []) effects.push({ type: "runway.send", to: { kind: "tenant", id: context.id }, event });
  return { context, effects };
}

function decide(context: TenantContext, event: TenantEvent): Decision<TenantAnswer> {
  const io: Io = { facts: new FactReader(event.facts), store: [], retentionMs: event.retention_ms ?? DEFAULT_ENDED_RETENTION_MS };
  if (context.legacy) {
    const migrated = migrateChunk(context, io.store, io.retentionMs, event.now);
    const left = legacyLeft(migrated.legacy);
    if (event.type === "tenant.migrate" || (left > 0 && (ASKED_AGAIN.has(event.type) || SENT_AGAIN.has(event.type)))) {
      const { now: _now, facts: _facts, retention_ms: _retention, ...command } = event;
      const again = left > 0 && (SENT_AGAIN.has(event.type) || (event.type === "tenant.admit_run" && event.tell_run)) ? [command] : [];
      const answer: MigratingAnswer | PromoteAnswer = event.type === "tenant.migrate" ? { outcome: "migrated", left } : { outcome: "migrating", left };
      return { context: migrated, answer, store: io.store, self: [...(left > 0 ? [{ type: "tenant.migrate" }] : []), ...again] };
    }
    // The last chunk is out (or the command reads no members: create, kill, drain): decided now,
    // reading the keys this transition writes as written.
    const written = new Map(io.store.map((op) => [op.key, op.value]));
    const d = decideMigrated(migrated, event, { ...io, facts: new FactReader(event.facts, written) });
    return { ...d, store: io.store, self: [...(left > 0 ? [{ type: "tenant.migrate" }] : []), ...(d.self ?? [])] };
  }
  const d = decideMigrated(context, event, io);
  return io.store.length > 0 ? { ...d, store: io.store } : d;
}

function decideMigrated(context: TenantContext, event: TenantEvent, io: Io): Decision<TenantAnswer> {
  switch (event.type) {
    case "tenant.create":
      return createDecision(context, event.settings, event.now);
    case "tenant.put":
      return settingsDecision(context, event.settings, event.now, io);
    case "tenant.kill":
    case "tenant.drain":
    case "tenant.resume":
      return stateDecision(context, STATE_COMMANDS[event.type], event.reason, event.now, io);
    case "tenant.admit_run":
      return event.tell_run ? toldRun(admitDecision(context, event, event.now, io)) : admitDecision(context, event, event.now, io);
    case "tenant.run_ended":
      return runEndedDecision(context, event, event.now, io);
    case "tenant.recheck":
      return recheckDecision(context, event, io);
    case "tenant.admit_expansion":
      return admitExpansionDecision(context, event, event.now, io);
    case "tenant.release_expansion":
      return releaseExpansionDecision(context, event, event.now, io);
    case "tenant.promote":
      return promoteDecision(context, event.now, io);
    case "tenant.migrate":
      return { context, answer: { outcome: "migrated", left: 0 } };
  }
}

/** Facts a command is likely to need, read before the first try of its decision (see `facts.ts`). */
export function likelyFacts(event: { type: string; run_id?: string; fresh?: boolean }): string[] {
  if (!event.run_id) return [];
  if (event.type === "tenant.admit_run") return event.fresh ? [] : [memberKey(event.run_id), endedKey(event.run_id)];
  // An end or a recheck reads the run's member key only (the tenant wrote it, so it is in memory):
  // the ended mark matters to a second admission, and a fresh run's end never has one to read.
  if (event.type === "tenant.run_ended" || event.type === "tenant.recheck") return [memberKey(event.run_id)];
  return [];
}

/**
 * An admission the run asked for itself (`tell_run`: a person admitted it after its create, so
 * no start waits on the answer): the run is told `run.admitted` when it holds a slot, the code
 * when refused, and nothing while it is queued (a freed slot tells it later).
 */
function toldRun(d: Decision<AdmitAnswer>): Decision<AdmitAnswer> {
  const a = d.answer;
  if (a.outcome === "admitted") return { ...d, admitted: [a.run_id] };
  if (a.outcome === "queued") return d;
  const reply: AdmissionRefusedReply = { type: "run.admission_refused", code: a.outcome, message: `the tenant refused the run: ${a.outcome}` };
  return { ...d, reply: { run: a.run_id, event: reply } };
}
