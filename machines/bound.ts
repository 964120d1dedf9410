import { z } from "zod";

/**
 * bound(): the one payload boundary (seed 004, "Result and error"). A result's output and refs
 * pass it before they are stored, so a stored result never holds a large payload.
 */

export const DEFAULT_BOUND_LIMIT = 32 * 1024;
/** The smallest limit bound() accepts: room for an empty container and one Dropped marker. */
export const MIN_BOUND_LIMIT = 128;

/**
 * What stands in for removed data. `items` is present on the marker that replaces the dropped
 * tail of an array (or the dropped keys of an object); a single replaced value has only `bytes`.
 * `bytes` is the serialised UTF-8 size of what was removed.
 */
export type Dropped = { $dropped: { reason: "size"; items?: number; bytes: number } };

/** Parses exactly a Dropped marker (no extra keys at either level). */
export const DroppedSchema = z.strictObject({
  $dropped: z.strictObject({ reason: z.literal("size"), items: z.number().int().positive().optional(), bytes: z.number().int().nonnegative() }),
});

/**
 * True only for a value of exactly the marker's shape: an object whose one key is `$dropped`,
 * holding `reason: "size"`, `bytes` and optionally `items`, and nothing else. A payload that
 * merely holds `reason` and `bytes` keys is not a marker.
 */
export function isDropped(x: unknown): x is Dropped {
  if (!isPlainRecord(x)) return false;
  const outer = Object.keys(x);
  if (outer.length !== 1 || outer[0] !== "$dropped") return false;
  const inner = x["$dropped"];
  if (!isPlainRecord(inner)) return false;
  const keys = Object.keys(inner);
  const hasItems = Object.prototype.hasOwnProperty.call(inner, "items");
  if (keys.length !== (hasItems ? 3 : 2)) return false;
  if (inner["reason"] !== "size" || !isCount(inner["bytes"])) return false;
  return !hasItems || (isCount(inner["items"]) && (inner["items"] as number) > 0);
}

export interface BoundResult {
  /** Serialises (JSON, UTF-8) to at most the limit. */
  value: unknown;
  /** True when anything was replaced or dropped. */
  truncated: boolean;
}

/**
 * Bounds `value` so that `JSON.stringify(result.value)` is at most `limitBytes` UTF-8 bytes,
 * keeping its shape: a value that fits is returned as is; an oversized top-level item or property
 * becomes a `{ $dropped: { reason: "size", bytes } }` marker, and a still-too-big container keeps
 * its longest head and counts its tail in one marker. Nested containers are kept or replaced
 * whole, never descended into, so the cost is linear in the input. Throws RangeError for a limit
 * below {@link MIN_BOUND_LIMIT} (and JSON.stringify's TypeError on a cycle or a BigInt).
 */
export function bound(value: unknown, limitBytes: number = DEFAULT_BOUND_LIMIT): BoundResult {
  if (!Number.isInteger(limitBytes) || limitBytes < MIN_BOUND_LIMIT) {
    throw new RangeError(`bound(): limitBytes must be an integer >= ${MIN_BOUND_LIMIT}, got ${limitBytes}`);
  }
  const whole = JSON.stringify(value);
  if (whole === undefined) return { value, truncated: false };
  const wholeBytes = utf8Length(whole);
  if (wholeBytes <= limitBytes) return { value, truncated: false };
  const json = toJSONValue(value);
  if (Array.isArray(json)) return boundArray(json, limitBytes);
  if (json !== null && typeof json === "object") return boundObject(json as Record<string, unknown>, limitBytes);
  return { value: itemMarker(wholeBytes), truncated: true };
}

function boundArray(items: readonly unknown[], limit: number): BoundResult {
  const n = items.length;
  const out: unknown[] = new Array<unknown>(n);
  const kept = new Array<number>(n);
  const orig = new Array<number>(n);
  let total = 2 + Math.max(0, n - 1);
  for (let i = 0; i < n; i++) {
    const item = items[i];
    const s = JSON.stringify(item);
    const b = s === undefined ? 4 : utf8Length(s); // undefined, functions and symbols serialise as null here
    orig[i] = b;
    if (b > limit) {
      out[i] = itemMarker(b);
      kept[i] = itemMarkerBytes(b);
    } else {
      out[i] = item;
      kept[i] = b;
    }
    total += kept[i]!;
  }
  if (total <= limit) return { value: out, truncated: true };
  // Longest head k such that [head…, tail marker] fits; the tail's bytes are the original sizes.
  let droppedBytes = 0;
  for (let i = 0; i < n; i++) droppedBytes += orig[i]!;
  let best = 0;
  let head = 0;
  for (let k = 0; k < n; k++) {
    const size = 2 + head + (k > 0 ? 1 : 0) + tailMarkerBytes(n - k, droppedBytes);
    if (size <= limit) best = k;
    else if (2 + head > limit) break;
    head += kept[k]! + (k > 0 ? 1 : 0);
    droppedBytes -= orig[k]!;
  }
  let tailBytes = 0;
  for (let i = best; i < n; i++) tailBytes += orig[i]!;
  const value = out.slice(0, best);
  value.push(tailMarker(n - best, tailBytes));
  return { value, truncated: true };
}

interface Entry {
  key: string;
  value: unknown;
  kept: number;
  orig: number;
}

function boundObject(obj: Record<string, unknown>, limit: number): BoundResult {
  const all: Entry[] = [];
  let total = 2;
  for (const key of Object.keys(obj)) {
    const v = obj[key];
    const s = JSON.stringify(v);
    if (s === undefined) continue; // omitted by JSON, so omitted here
    const keyBytes = utf8Length(JSON.stringify(key)) + 1;
    const b = utf8Length(s);
    const entry: Entry =
      b > limit
        ? { key, value: itemMarker(b), kept: keyBytes + itemMarkerBytes(b), orig: keyBytes + b }
        : { key, value: v, kept: keyBytes + b, orig: keyBytes + b };
    total += entry.kept + (all.length > 0 ? 1 : 0);
    all.push(entry);
  }
  if (total <= limit) return { value: build(all), truncated: true };
  // Longest head of keys k such that {head…,"$dropped":{"reason":"size","items":n,"bytes":b}} fits.
  // An input key named $dropped is never kept in this case, so the marker's key cannot collide.
  const candidates = all.filter((e) => e.key !== "$dropped");
  const collisions = all.length - candidates.length;
  const m = candidates.length;
  let droppedBytes = 0;
  for (const e of all) droppedBytes += e.orig;
  let best = 0;
  let head = 0;
  for (let k = 0; k < m; k++) {
    const size = 2 + head + (k > 0 ? 1 : 0) + droppedPropertyBytes(m - k + collisions, droppedBytes);
    if (size <= limit) best = k;
    else if (2 + head > limit) break;
    head += candidates[k]!.kept + (k > 0 ? 1 : 0);
    droppedBytes -= candidates[k]!.orig;
  }
  let tailBytes = 0;
  for (const e of all) tailBytes += e.orig;
  for (let i = 0; i < best; i++) tailBytes -= candidates[i]!.orig;
  const value = build(candidates.slice(0, best));
  value["$dropped"] = tailMarker(m - best + collisions, tailBytes).$dropped;
  return { value, truncated: true };
}

function build(entries: readonly Entry[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const e of entries) {
    if (e.key === "__proto__") Object.defineProperty(out, e.key, { value: e.value, enumerable: true, writable: true, configurable: true });
    else out[e.key] = e.value;
  }
  return out;
}

function itemMarker(bytes: number): Dropped {
  return { $dropped: { reason: "size", bytes } };
}

function tailMarker(items: number, bytes: number): Dropped {
  return { $dropped: { reason: "size", items, bytes } };
}

const ITEM_MARKER_BASE = JSON.stringify(itemMarker(0)).length - 1;
const TAIL_MARKER_BASE = JSON.stringify(tailMarker(0, 0)).length - 2;

function itemMarkerBytes(bytes: number): number {
  return ITEM_MARKER_BASE + String(bytes).length;
}

function tailMarkerBytes(items: number, bytes: number): number {
  return TAIL_MARKER_BASE + String(items).length + String(bytes).length;
}

/** The tail marker as an object property: `"$dropped":{…}`, i.e. the marker without its outer braces. */
function droppedPropertyBytes(items: number, bytes: number): number {
  return tailMarkerBytes(items, bytes) - 2;
}

/** What JSON.stringify serialises for a top-level value: its toJSON() result when it has one. */
function toJSONValue(value: unknown): unknown {
  if (value !== null && typeof value === "object" && typeof (value as { toJSON?: unknown }).toJSON === "function") {
    return (value as { toJSON: (key: string) => unknown }).toJSON("");
  }
  return value;
}

/** UTF-8 byte length of a string, without allocating (JSON.stringify output has no lone surrogates). */
export function utf8Length(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      n += 4;
      i++;
    } else n += 3;
  }
  return n;
}

function isPlainRecord(x: unknown): x is Record<string, unknown> {
  return x !== null && typeof x === "object" && !Array.isArray(x);
}

function isCount(x: unknown): boolean {
  return typeof x === "number" && Number.isInteger(x) && x >= 0;
}
