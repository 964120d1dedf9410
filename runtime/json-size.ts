/**
 * The UTF-8 size of a value's JSON, `Buffer.byteLength(JSON.stringify(value))`, counted without
 * building the string: a limit check on a request's input should not copy the input to learn
 * its size. Exact for what JSON.parse produces (plain objects and arrays, strings, finite
 * numbers, booleans, null); anything else (a `toJSON`, a class instance, a non-finite number
 * or an `undefined` member is counted by JSON.stringify's own rules) goes to JSON.stringify.
 */
export function jsonBytes(value: unknown): number {
  const counted = plainBytes(value);
  if (counted >= 0) return counted;
  const s = JSON.stringify(value);
  return s === undefined ? 0 : Buffer.byteLength(s);
}

/** -1: not plain JSON, count it the slow way. */
function plainBytes(value: unknown): number {
  switch (typeof value) {
    case "string":
      return stringBytes(value);
    case "boolean":
      return value ? 4 : 5;
    case "number":
      return Number.isFinite(value) ? String(value).length : -1;
    case "object": {
      if (value === null) return 4;
      if (Array.isArray(value)) {
        let n = 2 + Math.max(0, value.length - 1);
        for (const item of value) {
          const b = plainBytes(item);
          if (b < 0) return -1;
          n += b;
        }
        return n;
      }
      const proto = Object.getPrototypeOf(value) as unknown;
      if ((proto !== Object.prototype && proto !== null) || typeof (value as { toJSON?: unknown }).toJSON === "function") return -1;
      let n = 2;
      let members = 0;
      for (const key in value) {
        if (!Object.hasOwn(value, key)) continue;
        const b = plainBytes((value as Record<string, unknown>)[key]);
        if (b < 0) return -1;
        n += stringBytes(key) + 1 + b;
        members++;
      }
      return n + Math.max(0, members - 1);
    }
    default:
      return -1;
  }
}

/** A string as JSON.stringify writes it: quoted, escaped, lone surrogates as `\uXXXX`. */
function stringBytes(s: string): number {
  let n = 2;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20) n += c === 0x08 || c === 0x09 || c === 0x0a || c === 0x0c || c === 0x0d ? 2 : 6;
    else if (c === 0x22 || c === 0x5c) n += 2;
    else if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      n += 4;
      i++;
    } else if (c >= 0xd800 && c <= 0xdfff) n += 6;
    else n += 3;
  }
  return n;
}
