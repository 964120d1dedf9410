/**
 * FNV-1a 32 over the UTF-8 bytes of the key, mod P: the function nats-server's `partition()`
 * subject mapping uses (over the concatenated wildcard tokens), so a server-side mapping and
 * this code place a key in the same partition.
 */
export function fnv1a32(input: string): number {
  let hash = 0x811c9dc5;
  // An ASCII key (every id Runway makes) is its own UTF-8: hashed without encoding it first.
  for (let i = 0; i < input.length; i++) {
    const c = input.charCodeAt(i);
    if (c >= 0x80) return fnv1a32Bytes(encoder.encode(input));
    hash = Math.imul(hash ^ c, 0x01000193) >>> 0;
  }
  return hash >>> 0;
}

const encoder = new TextEncoder();

function fnv1a32Bytes(bytes: Uint8Array): number {
  let hash = 0x811c9dc5;
  for (const byte of bytes) hash = Math.imul(hash ^ byte, 0x01000193) >>> 0;
  return hash >>> 0;
}

export function partitionOf(key: string, partitions: number): number {
  if (!Number.isInteger(partitions) || partitions < 1) throw new RangeError(`partitions must be a positive integer, got ${partitions}`);
  return fnv1a32(key) % partitions;
}
