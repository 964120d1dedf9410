import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { jsonBytes } from "../../runtime/index.js";

// Issue 9, item 7: a start's input is measured without JSON.stringify-ing it.
const stringified = (v: unknown) => Buffer.byteLength(JSON.stringify(v) ?? "");

describe("jsonBytes: the UTF-8 size of JSON.stringify's output, counted without building it", () => {
  it("equals Buffer.byteLength(JSON.stringify(v)) for any JSON value, any Unicode in its strings and keys", () => {
    const text = fc.string({ unit: "binary" });
    const value = fc.letrec((tie) => ({
      v: fc.oneof(
        { depthSize: "small" },
        fc.constant(null),
        fc.boolean(),
        fc.double({ noNaN: true, noDefaultInfinity: true }),
        fc.integer(),
        text,
        fc.array(tie("v")),
        fc.dictionary(text, tie("v")),
      ),
    })).v;
    fc.assert(
      fc.property(value, (v) => jsonBytes(v) === stringified(v)),
      { numRuns: 2_000 },
    );
  });

  it("counts escapes, lone surrogates, surrogate pairs and what JSON.stringify leaves out or rewrites like it does", () => {
    const cases: unknown[] = [
      '\u0000\u0008\t\n\f\r\u001f"\\/',
      "\ud800",
      "x\udc00y",
      "😀é€",
      [undefined, () => 1, Symbol("s")],
      { a: undefined, b: () => 1, c: 1 },
      { when: new Date(0) },
      [Number.NaN, Number.POSITIVE_INFINITY, -0, 1e21, 5e-324],
      Object.create(null) as object,
      new Map([["a", 1]]),
    ];
    for (const v of cases) expect(jsonBytes(v)).toBe(stringified(v));
  });
});
