import { canonicalMIMEHeaderKey, Match, MsgHdrsImpl, type MsgHdrs } from "@nats-io/transport-node";

const encoder = new TextEncoder();

/**
 * Headers of a message this process sends. nats.js's `headers()` allocates and canonicalises on every
 * `set` and rebuilds the block on publish, a cost paid on every transition; this is a short list of
 * pairs, checked as nats.js checks them and encoded to the same bytes.
 */
export class SentHeaders implements MsgHdrs {
  readonly #keys: string[] = [];
  readonly #values: string[] = [];
  /** The block as last encoded: a publish sizes it first (jetstream.ts) and nats.js encodes it again. */
  #encoded: Uint8Array | undefined;

  get hasError(): boolean {
    return false;
  }

  get status(): string {
    return "";
  }

  get code(): number {
    return 0;
  }

  get description(): string {
    return "";
  }

  get(k: string, match: Match = Match.Exact): string {
    const at = this.#find(k, match);
    return at < 0 ? "" : this.#values[at]!;
  }

  last(k: string, match: Match = Match.Exact): string {
    const all = this.values(k, match);
    return all.length === 0 ? "" : all[all.length - 1]!;
  }

  has(k: string, match: Match = Match.Exact): boolean {
    return this.#find(k, match) >= 0;
  }

  values(k: string, match: Match = Match.Exact): string[] {
    const out: string[] = [];
    for (let i = 0; i < this.#keys.length; i++) if (same(this.#keys[i]!, k, match)) out.push(this.#values[i]!);
    return out;
  }

  keys(): string[] {
    return [...new Set(this.#keys)];
  }

  set(k: string, v: string, match: Match = Match.Exact): void {
    this.delete(k, match);
    this.append(k, v, match);
  }

  append(k: string, v: string, match: Match = Match.Exact): void {
    checkKey(k);
    // nats.js's own check (no CR or LF) and trim.
    const value = MsgHdrsImpl.validHeaderValue(v);
    this.#encoded = undefined;
    // A key already present keeps the spelling it was first given, and its values stay together
    // (nats.js groups them by key): the block is then encoded in one pass.
    let last = -1;
    for (let i = 0; i < this.#keys.length; i++) if (same(this.#keys[i]!, k, match)) last = i;
    if (last < 0) {
      this.#keys.push(match === Match.CanonicalMIME ? canonicalMIMEHeaderKey(k) : k);
      this.#values.push(value);
    } else {
      this.#keys.splice(last + 1, 0, this.#keys[last]!);
      this.#values.splice(last + 1, 0, value);
    }
  }

  delete(k: string, match: Match = Match.Exact): void {
    this.#encoded = undefined;
    for (let i = this.#keys.length - 1; i >= 0; i--) {
      if (!same(this.#keys[i]!, k, match)) continue;
      this.#keys.splice(i, 1);
      this.#values.splice(i, 1);
    }
  }

  *[Symbol.iterator](): Iterator<[string, string[]]> {
    for (const k of this.keys()) yield [k, this.values(k)];
  }

  /** The header block as NATS sends it (empty without headers), byte for byte as nats.js encodes it. */
  encode(): Uint8Array {
    if (this.#encoded) return this.#encoded;
    if (this.#keys.length === 0) return (this.#encoded = new Uint8Array(0));
    let s = "NATS/1.0";
    for (let i = 0; i < this.#keys.length; i++) s += `\r\n${this.#keys[i]}: ${this.#values[i]}`;
    return (this.#encoded = encoder.encode(`${s}\r\n\r\n`));
  }

  #find(k: string, match: Match): number {
    for (let i = 0; i < this.#keys.length; i++) if (same(this.#keys[i]!, k, match)) return i;
    return -1;
  }
}

/** Headers for a message to send (see {@link SentHeaders}). */
export function sentHeaders(): SentHeaders {
  return new SentHeaders();
}

function same(stored: string, k: string, match: Match): boolean {
  if (match === Match.Exact) return stored === k;
  if (match === Match.CanonicalMIME) return stored === canonicalMIMEHeaderKey(k);
  return stored.toLowerCase() === k.toLowerCase();
}

/** A header name: printable ASCII but the colon (RFC 822, 3.1.2), as nats.js requires. */
function checkKey(k: string): void {
  for (let i = 0; i < k.length; i++) {
    const c = k.charCodeAt(i);
    if (c === 58 || c < 33 || c > 126) throw new TypeError(`'${k[i]}' is not a valid character in a header name`);
  }
}
