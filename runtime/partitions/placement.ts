import { fnv1a32 } from "./hash.js";

/**
 * Rendezvous (highest-random-weight) placement: each partition goes to the live node with the
 * highest hash of (node, partition). It is a pure function of the live set, so every node
 * computes the same answer without talking, and a node joining or leaving moves only the
 * partitions it wins or held (about P/N of them).
 */
export function preferredOwner(partition: number, liveNodes: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestScore = -1;
  for (const node of liveNodes) {
    const score = fnv1a32(`${node}/${partition}`);
    if (score > bestScore || (score === bestScore && best !== undefined && node < best)) {
      best = node;
      bestScore = score;
    }
  }
  return best;
}

/** The partitions `node` should own given the live set. */
export function placementFor(node: string, liveNodes: readonly string[], partitions: number): number[] {
  const out: number[] = [];
  for (let p = 0; p < partitions; p++) if (preferredOwner(p, liveNodes) === node) out.push(p);
  return out;
}
