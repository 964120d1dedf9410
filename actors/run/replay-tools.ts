import type { NatsConnection } from "@nats-io/transport-node";
import { gateToken, type IntentFact, type Receipt, type RunFact } from "../../machines/index.js";
import { RunwayFault } from "../../runtime/index.js";
import type { ToolCallOutcome, ToolCallRequest, ToolLookup, ToolPort } from "./tool-calls.js";
import type { JournaledDecision } from "./tool-step.js";
import { readFacts } from "./trajectory.js";

/** What a replay's calls are answered from: the original run's intents and receipts, by the key's step and call (the run id left out). */
interface Recorded {
  intents: Map<string, IntentFact>;
  receipts: Map<string, Receipt>;
  /** Its gated calls' decisions, by approval token (`<node>:approval.<server>/<tool>`). */
  decisions: Map<string, JournaledDecision>;
}

/** The tool port of a replay, and the decisions it follows on its gated calls. */
export interface ReplayPort extends ToolPort {
  decided(node: string, server: string, tool: string): Promise<JournaledDecision | undefined>;
  /** The receipt the original stored under the same key (the replay's own run id in `key`): an agent's turn, a subagent's end. */
  recorded(key: string): Promise<Receipt | undefined>;
  /** The decision on an agent's gated proposal of turn `turn`. */
  turnDecided(node: string, turn: number, server: string, tool: string): Promise<JournaledDecision | undefined>;
}

/** A key without its run: `<step path>:<call hash>`. */
function callOf(key: string, run: string): string {
  return key.startsWith(`${run}:`) ? key.slice(run.length + 1) : key;
}

/**
 * The tool port of a replay: every call is answered from the receipt the original run stored for
 * the same step and call, and nothing leaves the node. A call the original never made, or whose
 * outcome it never learnt, is a divergence: refused `replay_diverged`. A tool node's gated call
 * follows the original's journaled decision (`decided`): made with the arguments it was approved
 * or edited to, or not made when it was rejected or expired.
 */
/** A decision as its gated call follows it: an edit's arguments are its payload, an approval's those it was asked with. */
function decisionOf(f: Extract<RunFact, { t: "decision" }>, requested: unknown): JournaledDecision {
  if (f.decision === "edited") return { decision: "edited", arguments: f.payload ?? null };
  if (f.decision === "approved") return { decision: "approved", arguments: requested ?? null };
  if (f.decision === "rejected") return { decision: "rejected", by: f.by, ...(f.reason ? { reason: f.reason } : {}) };
  return { decision: "expired" };
}

export class ReplayTools {
  private readonly recorded = new Map<string, Promise<Recorded>>();

  constructor(
    private readonly nc: NatsConnection,
    private readonly partitions: number,
  ) {}

  /** The port for replays of `original` (one cached read of its journal). */
  of(original: string, replay: string): ReplayPort {
    return {
      decided: async (node, server, tool) => (await this.read(original)).decisions.get(gateToken(node, server, tool)),
      recorded: async (key) => (await this.read(original)).receipts.get(callOf(key, replay)),
      turnDecided: async (node, turn, server, tool) => (await this.read(original)).decisions.get(`${node}:turn${turn}:approval.${server}/${tool}`),
      lookup: async (_tenant, server, tool) => {
        const r = await this.read(original);
        for (const f of r.intents.values()) if (f.server === server && f.tool === tool) return { outcome: "found", class: f.class };
        return { outcome: "found", class: "non_idempotent" } satisfies ToolLookup;
      },
      call: async (req: ToolCallRequest): Promise<ToolCallOutcome> => {
        const r = await this.read(original);
        const receipt = r.receipts.get(callOf(req.key, replay));
        if (!receipt)
          return {
            outcome: "refused",
            code: "replay_diverged",
            message: `${req.server}/${req.tool} with these arguments has no receipt in run ${original}`,
            retryable: false,
          };
        if (receipt.state === "failed") return { outcome: "refused", code: receipt.error.code, message: receipt.error.message, retryable: false };
        return { outcome: "ok", result: { structuredContent: receipt.value }, bytes: 0 };
      },
      // A replay never makes a call, so it never waits on a task.
      pollTask: () => Promise.resolve({ outcome: "unknown", code: "replay_has_no_tasks", message: "a replay makes no calls" }),
      cancelTask: () => Promise.resolve(),
    };
  }

  private read(original: string): Promise<Recorded> {
    let r = this.recorded.get(original);
    if (!r) {
      r = readFacts(this.nc, this.partitions, original).then((facts) => {
        if (!Array.isArray(facts)) throw new RunwayFault("store_unavailable", `journal of ${original}: ${facts.detail}`, { kind: "retryable" });
        const out: Recorded = { intents: new Map(), receipts: new Map(), decisions: new Map() };
        const requested = new Map<string, unknown>();
        for (const f of facts) {
          if (f.t === "intent") out.intents.set(callOf(f.key, original), f);
          else if (f.t === "approval") requested.set(callOf(f.id, original), (f.payload as { arguments?: unknown } | null)?.arguments);
          else if (f.t === "decision") out.decisions.set(callOf(f.id, original), decisionOf(f, requested.get(callOf(f.id, original))));
          else if (f.t === "receipt") {
            const { t: _t, ...receipt } = f;
            out.receipts.set(callOf(f.key, original), receipt);
          }
        }
        return out;
      });
      r.catch(() => this.recorded.delete(original));
      this.recorded.set(original, r);
      // A finished run's journal does not change: keep a few, drop the oldest.
      if (this.recorded.size > 64) this.recorded.delete(this.recorded.keys().next().value!);
    }
    return r;
  }
}
