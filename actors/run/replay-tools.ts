import type { NatsConnection } from "@nats-io/transport-node";
import type { IntentFact, Receipt } from "../../machines/index.js";
import { RunwayFault } from "../../runtime/index.js";
import type { ToolCallOutcome, ToolCallRequest, ToolLookup, ToolPort } from "./tool-calls.js";
import { readFacts } from "./trajectory.js";

/** What a replay's calls are answered from: the original run's intents and receipts, by the key's step and call (the run id left out). */
interface Recorded {
  intents: Map<string, IntentFact>;
  receipts: Map<string, Receipt>;
}

/** A key without its run: `<step path>:<call hash>`. */
function callOf(key: string, run: string): string {
  return key.startsWith(`${run}:`) ? key.slice(run.length + 1) : key;
}

/**
 * The tool port of a replay: every call is answered from the receipt the original run stored for
 * the same step and call, and nothing leaves the node. A call the original never made, or whose
 * outcome it never learnt, is a divergence: refused `replay_diverged`.
 */
export class ReplayTools {
  private readonly recorded = new Map<string, Promise<Recorded>>();

  constructor(
    private readonly nc: NatsConnection,
    private readonly partitions: number,
  ) {}

  /** The port for replays of `original` (one cached read of its journal). */
  of(original: string, replay: string): ToolPort {
    return {
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
        const out: Recorded = { intents: new Map(), receipts: new Map() };
        for (const f of facts) {
          if (f.t === "intent") out.intents.set(callOf(f.key, original), f);
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
