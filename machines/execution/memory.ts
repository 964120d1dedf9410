import type { StepState } from "../step/index.js";
import { RUN_CONTEXT_VERSION, type ItemRun, type MapRun, type NodeRun, type Receipt, type RunContext, type RunFact, type RunMemory } from "./types.js";

/**
 * A run's input and outputs, folded from its journal's facts in the order they were stored. The
 * run actor keeps one per run in memory (rebuilt from the journal when it is not there) and hands
 * it to every transition; a transition's new facts are added once they are stored.
 */
export class RunFacts implements RunMemory {
  input: unknown = {};
  // Made on first use: a node keeps one of these per run it decides for, and a parked run has no outputs yet.
  private outputs: Map<string, unknown> | undefined;
  private items: Map<string, unknown> | undefined;
  private itemsOf: Map<string, number> | undefined;
  private receipts: Map<string, Receipt> | undefined;
  private receiptFacts = 0;

  add(fact: RunFact): void {
    if (fact.t === "input") this.input = fact.value;
    else if (fact.t === "output")
      (this.outputs ??= new Map()).set(
        fact.node,
        outputValue(fact, (key) => this.receipt(key)),
      );
    else if (fact.t === "intent" || fact.t === "task" || fact.t === "approval" || fact.t === "decision") return;
    else if (fact.t === "receipt") {
      const { t: _t, ...receipt } = fact;
      (this.receipts ??= new Map()).set(fact.key, receipt);
      this.receiptFacts++;
    } else {
      const key = `${fact.node}[${fact.i}]`;
      const items = (this.items ??= new Map());
      const itemsOf = (this.itemsOf ??= new Map());
      if (!items.has(key)) itemsOf.set(fact.node, (itemsOf.get(fact.node) ?? 0) + 1);
      items.set(key, fact.value);
    }
  }

  output(node: string): unknown {
    return this.outputs?.get(node);
  }

  item(node: string, i: number): unknown {
    return this.items?.get(`${node}[${i}]`);
  }

  receipt(key: string): Receipt | undefined {
    return this.receipts?.get(key);
  }

  private hasOutput(node: string): boolean {
    return this.outputs?.has(node) ?? false;
  }

  private hasItem(key: string): boolean {
    return this.items?.has(key) ?? false;
  }

  private itemCount(node: string): number {
    return this.itemsOf?.get(node) ?? 0;
  }

  /** Whether this holds every output `run`'s head says its journal has (a reader behind the leader holds fewer). */
  covers(run: RunContext): boolean {
    return this.coversWith(run, undefined);
  }

  /**
   * This memory plus facts decided but not stored yet (earlier commands of the batch being
   * decided), without copying it: what a transition in the middle of a batch reads.
   */
  with(pending: readonly RunFact[]): RunMemory & { covers(run: RunContext): boolean } {
    if (pending.length === 0) return this;
    const extra = new RunFacts();
    extra.input = this.input;
    // An output that names a receipt names one stored with it (pending too), or earlier (here).
    for (const f of pending)
      extra.add(
        f.t === "output" && "receipt" in f ? { t: "output", node: f.node, value: outputValue(f, (key) => extra.receipt(key) ?? this.receipt(key)) } : f,
      );
    return {
      input: extra.input,
      output: (node) => (extra.hasOutput(node) ? extra.output(node) : this.output(node)),
      item: (node, i) => (extra.hasItem(`${node}[${i}]`) ? extra.item(node, i) : this.item(node, i)),
      receipt: (key) => extra.receipt(key) ?? this.receipt(key),
      covers: (run) => this.coversWith(run, extra),
    };
  }

  private coversWith(run: RunContext, extra: RunFacts | undefined): boolean {
    if (this.receiptFacts + (extra?.receiptFacts ?? 0) < (run.receipts ?? 0)) return false;
    for (const [id, n] of Object.entries(run.nodes)) {
      if (n.out && !this.hasOutput(id) && !extra?.hasOutput(id)) return false;
      if (n.map && this.itemCount(id) + (extra?.itemCount(id) ?? 0) < n.map.succeeded) return false;
    }
    return true;
  }
}

/**
 * An output fact's value: its own, or (a tool node's) the value of the observed receipt it names,
 * which its write stored before it (null if none is known: never the case for a stored journal).
 */
export function outputValue(fact: Extract<RunFact, { t: "output" }>, receipt: (key: string) => Receipt | undefined): unknown {
  if (!("receipt" in fact)) return fact.value;
  const r = receipt(fact.receipt);
  return r?.state === "observed" ? r.value : null;
}

/** A version-1 head (before journals) held its input and outputs itself. */
interface HeadV1 {
  input?: unknown;
  nodes: Record<string, V1Node>;
  v?: undefined;
}

type V1Node = Omit<NodeRun, "map" | "out"> & {
  items?: (ItemRun & { output?: unknown })[];
  output?: unknown;
  output_bytes?: number;
  fatal?: boolean;
};

/** True for a head stored before journals (version 1). */
export function isHeadV1(run: unknown): run is HeadV1 {
  return typeof run === "object" && run !== null && (run as { v?: unknown }).v === undefined;
}

/** The facts a version-1 head held inline: its input, each node's output, each map item's output. */
export function factsOfHeadV1(run: HeadV1): RunFact[] {
  const facts: RunFact[] = [{ t: "input", value: run.input ?? {} }];
  for (const [id, n] of Object.entries(run.nodes)) {
    if (n.items) {
      n.items.forEach((it, i) => {
        if (it.output !== undefined && it.step.status === "succeeded") facts.push({ t: "item", node: id, i, value: it.output });
      });
    } else if (n.output !== undefined && !n.taken) facts.push({ t: "output", node: id, value: n.output });
  }
  return facts;
}

/**
 * A version-1 head as a version-2 one: input and outputs leave it (its record in the run's
 * journal still holds them: `factsOfHeadV1`), a map keeps only its unsettled items.
 */
export function migrateHeadV1(run: HeadV1 & Record<string, unknown>): RunContext {
  const { input: _input, ...rest } = run;
  const nodes: Record<string, NodeRun> = {};
  for (const [id, n] of Object.entries(run.nodes)) {
    const { items, output, output_bytes, fatal: _fatal, ...head } = n;
    const node: NodeRun = { ...head };
    if (items) node.map = mapOfV1(items, output_bytes ?? 0);
    else if (output !== undefined && !n.taken) node.out = true;
    nodes[id] = node;
  }
  return { ...(rest as unknown as RunContext), nodes, v: RUN_CONTEXT_VERSION };
}

function mapOfV1(items: (ItemRun & { output?: unknown })[], outputBytes: number): MapRun {
  const map: MapRun = { total: items.length, next: items.length, live: {}, succeeded: 0, failed: 0, output_bytes: outputBytes };
  items.forEach((it, i) => {
    const status: StepState["status"] = it.step.status;
    if (status === "succeeded") map.succeeded++;
    else if (status === "failed") {
      map.failed++;
      map.first_failed ??= i;
    } else {
      const { output: _output, ...live } = it;
      map.live[String(i)] = live;
    }
  });
  return map;
}
