import { Packr } from "msgpackr";
import type { ZodType } from "zod";
import { RunwayFault } from "./errors.js";

/**
 * Every stored or wire body carries its schema name and version, so a reader can refuse what it
 * does not understand instead of misreading it. Bodies are validated by zod when decoded: a
 * decode is a boundary.
 */
export type DecodeResult<T> = { ok: true; value: T } | { ok: false; reason: "bad_encoding" | "unsupported_schema" | "invalid_body"; detail: string };

export interface Codec<T> {
  readonly schema: string;
  readonly version: number;
  encode(value: T): Uint8Array;
  decode(bytes: Uint8Array): DecodeResult<T>;
}

// Plain msgpack (no msgpackr records) so that any msgpack tool can read what we store. Each map
// gets the smallest header its size takes (`variableMapSize`; msgpackr's default reserves a map16
// for every one): smaller records, faster packing, and a reader sees plain msgpack either way.
const packr = new Packr({ useRecords: false, moreTypes: false, variableMapSize: true });

export function packMsgpack(value: unknown): Uint8Array {
  return packr.pack(value);
}

export function unpackMsgpack(bytes: Uint8Array): unknown {
  return packr.unpack(bytes);
}

/**
 * The deepest nesting an encoded body may have, envelope included. How deep msgpackr and
 * JSON.stringify recurse before the stack runs out depends on whether the JIT has optimised them,
 * so without a bound one process could store what another refuses (and a record stored warm could
 * fail its next write cold). Far below either limit, the bound makes `encode` decide the same way.
 */
export const MAX_ENCODED_DEPTH = 512;

/** True when `value` nests maps and arrays more than `levels` deep; the recursion stops at `levels`. */
function deeperThan(value: unknown, levels: number): boolean {
  if (value === null || typeof value !== "object" || ArrayBuffer.isView(value)) return false;
  if (levels === 0) return true;
  // Leaves (most values) are skipped here rather than in a call of their own.
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const v: unknown = value[i];
      if (typeof v === "object" && v !== null && deeperThan(v, levels - 1)) return true;
    }
    return false;
  }
  for (const key in value) {
    const v = (value as Record<string, unknown>)[key];
    if (typeof v === "object" && v !== null && deeperThan(v, levels - 1)) return true;
  }
  return false;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

interface Envelope {
  s: string;
  v: number;
  b: unknown;
}

export interface CodecSpec<T> {
  schema: string;
  version: number;
  body: ZodType<T>;
  /** `json` for records operators read with the `nats` CLI; `msgpack` for the hot path. */
  format?: "msgpack" | "json";
  /** Skip zod on decode for bodies this process wrote itself and trusts (hot-path cache fill). */
  trusted?: boolean;
}

export function versionedCodec<T>(spec: CodecSpec<T>): Codec<T> {
  const format = spec.format ?? "msgpack";
  const raw =
    format === "json"
      ? {
          encode: (e: Envelope) => encoder.encode(JSON.stringify(e)),
          decode: (b: Uint8Array) => JSON.parse(decoder.decode(b)) as unknown,
        }
      : { encode: (e: Envelope) => packMsgpack(e), decode: (b: Uint8Array) => unpackMsgpack(b) };
  return {
    schema: spec.schema,
    version: spec.version,
    /** Throws `RunwayFault` `too_deep` for a body nested past {@link MAX_ENCODED_DEPTH}. */
    encode(value: T): Uint8Array {
      const envelope = { s: spec.schema, v: spec.version, b: value };
      if (deeperThan(envelope, MAX_ENCODED_DEPTH))
        throw new RunwayFault("too_deep", `${spec.schema} body nests maps and arrays deeper than ${MAX_ENCODED_DEPTH} levels`);
      return raw.encode(envelope);
    },
    decode(bytes: Uint8Array): DecodeResult<T> {
      let envelope: unknown;
      try {
        envelope = raw.decode(bytes);
      } catch (err) {
        return { ok: false, reason: "bad_encoding", detail: String((err as Error).message ?? err) };
      }
      if (typeof envelope !== "object" || envelope === null) {
        return { ok: false, reason: "bad_encoding", detail: "not an envelope" };
      }
      const { s, v, b } = envelope as Partial<Envelope>;
      if (s !== spec.schema || v !== spec.version) {
        return {
          ok: false,
          reason: "unsupported_schema",
          detail: `expected ${spec.schema}@${spec.version}, got ${String(s)}@${String(v)}`,
        };
      }
      if (spec.trusted) return { ok: true, value: b as T };
      const parsed = spec.body.safeParse(b);
      if (!parsed.success) {
        return { ok: false, reason: "invalid_body", detail: parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ") };
      }
      return { ok: true, value: parsed.data };
    },
  };
}
