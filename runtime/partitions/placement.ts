import { fnv1a32 } from "./hash.js";

/**
 * Versions of the placement function. Version 1's FNV-1a score barely mixes the last bytes, so nodes
 * whose names differ in one character rank alike and one wins every partition; 2 mixes the hash
 * first. A cluster uses the lowest version any live node announces, so nodes of two versions agree
 * on every partition during an upgrade.
 */
export type PlacementVersion = 1 | 2;
export const PLACEMENT_VERSION: PlacementVersion = 2;

/** murmur3's 32-bit finaliser: every input bit moves about half the output bits. */
function mix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/**
 * Rendezvous (highest-random-weight) placement: each partition goes to the live node with the
 * highest hash of (node, partition). It is a pure function of the live set, so every node
 * computes the same answer without talking, and a node joining or leaving moves only the
 * partitions it wins or held (about P/N of them).
 */
export function preferredOwner(partition: number, liveNodes: readonly string[], version: PlacementVersion = PLACEMENT_VERSION): string | undefined {
  let best: string | undefined;
  let bestScore = -1;
  for (const node of liveNodes) {
    const hash = fnv1a32(`${node}/${partition}`);
    const score = version === 1 ? hash : mix32(hash);
    if (score > bestScore || (score === bestScore && best !== undefined && node < best)) {
      best = node;
      bestScore = score;
    }
  }
  return best;
}

/** The partitions `node` should own given the live set. */
export function placementFor(node: string, liveNodes: readonly string[], partitions: number, version: PlacementVersion = PLACEMENT_VERSION): number[] {
  const out: number[] = [];
  for (let p = 0; p < partitions; p++) if (preferredOwner(p, liveNodes, version) === node) out.push(p);
  return out;
}
