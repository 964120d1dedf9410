/**
 * FNV-1a 32 over the UTF-8 bytes of the key, mod P: the function nats-server's `partition()`
 * subject mapping uses (over the concatenated wildcard tokens), so a server-side mapping and
 * this code place a key in the same partition.
 */
export function fnv1a32(input: string): number {
  let hash = 0x811c9dc5;
  const bytes = new TextEncoder().encode(input);
  for (const byte of bytes) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash >>> 0;
}

export function partitionOf(key: string, partitions: number): number {
  if (!Number.isInteger(partitions) || partitions < 1) throw new RangeError(`partitions must be a positive integer, got ${partitions}`);
  return fnv1a32(key) % partitions;
}
