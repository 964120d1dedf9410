import { Packr } from "msgpackr";
import type { ZodType } from "zod";

/**
 * Every stored or wire body carries its schema name and version, so a reader can refuse what it
 * does not understand instead of misreading it. Bodies are validated by zod when decoded: a
 * decode is a boundary.
 */
export type DecodeResult<T> =
  | { ok: true; value: T }
  | { ok: false; reason: "bad_encoding" | "unsupported_schema" | "invalid_body"; detail: string };

export interface Codec<T> {
  readonly schema: string;
  readonly version: number;
  encode(value: T): Uint8Array;
  decode(bytes: Uint8Array): DecodeResult<T>;
}

// Plain msgpack (no msgpackr records) so that any msgpack tool can read what we store.
const packr = new Packr({ useRecords: false, moreTypes: false });

export function packMsgpack(value: unknown): Uint8Array {
  return packr.pack(value);
}

export function unpackMsgpack(bytes: Uint8Array): unknown {
  return packr.unpack(bytes);
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
    encode(value: T): Uint8Array {
      return raw.encode({ s: spec.schema, v: spec.version, b: value });
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
