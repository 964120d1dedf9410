import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { DEFAULT_BOUND_LIMIT, DroppedSchema, MIN_BOUND_LIMIT, bound, isDropped, utf8Length } from "../../machines/bound.js";

const KB = 1024;
const bytesOf = (v: unknown): number => new TextEncoder().encode(JSON.stringify(v)).length;
const text = (n: number, ch = "x"): string => ch.repeat(n);

describe("bound()", () => {
  it("returns a value that fits unchanged, the same reference, not truncated", () => {
    const value = { summary: "ok", items: [1, 2, 3] };
    const out = bound(value);
    expect(out.truncated).toBe(false);
    expect(out.value).toBe(value);
    expect(bound(null)).toEqual({ value: null, truncated: false });
    expect(bound(undefined)).toEqual({ value: undefined, truncated: false });
  });

  it("a RunResult output above 32 KB is truncated without breaking its shape, and still parses", () => {
    const output = { companies: Array.from({ length: 400 }, (_, i) => ({ id: `c${i}`, name: `Company ${i}`, note: text(60) })), summary: "qualified" };
    expect(bytesOf(output)).toBeGreaterThan(DEFAULT_BOUND_LIMIT);
    const out = bound(output);
    expect(out.truncated).toBe(true);
    expect(bytesOf(out.value)).toBeLessThanOrEqual(DEFAULT_BOUND_LIMIT);
    const parsed = JSON.parse(JSON.stringify(out.value)) as Record<string, unknown>;
    expect(Object.keys(parsed).sort()).toEqual(["companies", "summary"]);
    expect(parsed["summary"]).toBe("qualified");
    expect(isDropped(parsed["companies"])).toBe(true);
  });

  it("replaces every item over the limit on its own, not only the first one it meets", () => {
    const big = text(40 * KB);
    const list = ["a", big, "b", big, "c", big];
    const out = bound(list);
    expect(out.truncated).toBe(true);
    const marker = { $dropped: { reason: "size", bytes: big.length + 2 } };
    expect(out.value).toEqual(["a", marker, "b", marker, "c", marker]);
    expect(bytesOf(out.value)).toBeLessThanOrEqual(DEFAULT_BOUND_LIMIT);

    const dict = { first: big, small: 1, second: { deep: big }, third: [big] };
    const outDict = bound(dict);
    expect(Object.keys(outDict.value as object)).toEqual(["first", "small", "second", "third"]);
    const v = outDict.value as Record<string, unknown>;
    expect([v["first"], v["second"], v["third"]].every(isDropped)).toBe(true);
    expect(v["small"]).toBe(1);
    expect(v["second"]).toEqual({ $dropped: { reason: "size", bytes: bytesOf(dict.second) } });
  });

  it("reports truncated for a replacement as well as for a drop", () => {
    const replaced = bound([1, text(40 * KB), 2]);
    expect(replaced.truncated).toBe(true);
    expect((replaced.value as unknown[]).some((x) => isDropped(x) && x.$dropped.items === undefined)).toBe(true);
    const dropped = bound(Array.from({ length: 2_000 }, (_, i) => `item-${i}-${text(20)}`));
    expect(dropped.truncated).toBe(true);
    const last = (dropped.value as unknown[]).at(-1);
    expect(isDropped(last) && last.$dropped.items).toBeGreaterThan(0);
  });

  it("a dict of ten thousand short keys returns inside the limit, because the envelope is counted", () => {
    const dict = Object.fromEntries(Array.from({ length: 10_000 }, (_, i) => [`k${i}`, i]));
    const out = bound(dict);
    expect(out.truncated).toBe(true);
    const size = bytesOf(out.value);
    expect(size).toBeLessThanOrEqual(DEFAULT_BOUND_LIMIT);
    const v = out.value as Record<string, unknown>;
    const kept = Object.keys(v).filter((k) => k !== "$dropped");
    expect(kept).toEqual(Object.keys(dict).slice(0, kept.length));
    for (const k of kept) expect(v[k]).toBe(dict[k]);
    const info = v["$dropped"] as { reason: string; items: number; bytes: number };
    expect(info.reason).toBe("size");
    expect(info.items).toBe(10_000 - kept.length);
    const droppedKeys = Object.keys(dict).slice(kept.length);
    expect(info.bytes).toBe(droppedKeys.reduce((n, k) => n + bytesOf(k) + 1 + bytesOf(dict[k]), 0));
    // Exact, not merely safe: one more key would not have fitted.
    const withOneMore = {
      ...Object.fromEntries(kept.map((k) => [k, v[k]])),
      [droppedKeys[0]!]: dict[droppedKeys[0]!],
      $dropped: { ...info, items: info.items - 1, bytes: info.bytes - bytesOf(droppedKeys[0]!) - 1 - bytesOf(dict[droppedKeys[0]!]) },
    };
    expect(bytesOf(withOneMore)).toBeGreaterThan(DEFAULT_BOUND_LIMIT);
  });

  it("a RunResult carrying five hundred refs is bounded: the head survives, the tail is one marker", () => {
    const refs = Array.from({ length: 500 }, (_, i) => ({
      kind: "prospect",
      table: "sales.prospects",
      id: `0b7d7a52-6a1e-4b7e-9f1e-${String(i).padStart(12, "0")}`,
    }));
    expect(bytesOf(refs)).toBeGreaterThan(DEFAULT_BOUND_LIMIT);
    const out = bound(refs, 32 * KB);
    const list = out.value as unknown[];
    expect(out.truncated).toBe(true);
    expect(bytesOf(list)).toBeLessThanOrEqual(32 * KB);
    const head = list.slice(0, -1);
    expect(head).toEqual(refs.slice(0, head.length));
    expect(head.every((r) => !isDropped(r))).toBe(true);
    const tail = list.at(-1);
    expect(isDropped(tail)).toBe(true);
    expect(tail).toEqual({ $dropped: { reason: "size", items: 500 - head.length, bytes: refs.slice(head.length).reduce((n, r) => n + bytesOf(r), 0) } });
    const oneMore = [...refs.slice(0, head.length + 1), { $dropped: { reason: "size", items: 499 - head.length, bytes: 0 } }];
    expect(bytesOf(oneMore)).toBeGreaterThan(32 * KB);
  });

  it("counts UTF-8 bytes, not UTF-16 units", () => {
    const s = "é中😀";
    expect(utf8Length(s)).toBe(new TextEncoder().encode(s).length);
    const list = Array.from({ length: 100 }, () => text(50, "😀"));
    const out = bound(list, 4 * KB);
    expect(JSON.stringify(out.value).length).toBeLessThan(4 * KB);
    expect(bytesOf(out.value)).toBeLessThanOrEqual(4 * KB);
    expect((out.value as unknown[]).length).toBeGreaterThan(1);
  });

  it("replaces an oversized scalar with a marker", () => {
    const s = text(40 * KB);
    expect(bound(s)).toEqual({ value: { $dropped: { reason: "size", bytes: s.length + 2 } }, truncated: true });
  });

  it("never lets a $dropped input key collide with the marker key", () => {
    const dict: Record<string, unknown> = { $dropped: "mine", ...Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`k${i}`, text(20)])) };
    const out = bound(dict, 512);
    expect(bytesOf(out.value)).toBeLessThanOrEqual(512);
    const v = out.value as Record<string, { items: number }>;
    expect(v["$dropped"]).toMatchObject({ reason: "size" });
    expect(Object.keys(v).length - 1 + v["$dropped"]!.items).toBe(101);
  });

  it("keeps a __proto__ key as data", () => {
    const dict = JSON.parse(`{"__proto__": {"polluted": true}, "big": "${text(300)}", "small": 1}`) as Record<string, unknown>;
    const out = bound(dict, 128);
    expect(Object.getPrototypeOf(out.value)).toBe(Object.prototype);
    expect(JSON.parse(JSON.stringify(out.value))).toMatchObject({ ["__proto__"]: { polluted: true } });
  });

  it("serialises each item a bounded number of times, however large the input", () => {
    let calls = 0;
    const items = Array.from({ length: 50_000 }, (_, i) => ({ toJSON: () => (calls++, { i, pad: "0123456789" }) }));
    const out = bound(items);
    expect(bytesOf(out.value)).toBeLessThanOrEqual(DEFAULT_BOUND_LIMIT);
    expect(calls).toBeLessThanOrEqual(2 * items.length + 2_000);
  });

  it("refuses a limit too small to hold a marker", () => {
    expect(() => bound([1], MIN_BOUND_LIMIT - 1)).toThrow(RangeError);
    expect(() => bound([1], 1.5 * KB + 0.5)).toThrow(RangeError);
  });
});

describe("isDropped / DroppedSchema", () => {
  it("a Dropped marker parses, and a payload that really holds reason and bytes is not read as one", () => {
    const markers = [{ $dropped: { reason: "size", bytes: 123 } }, { $dropped: { reason: "size", items: 4, bytes: 99 } }];
    for (const m of markers) {
      expect(isDropped(m)).toBe(true);
      expect(DroppedSchema.parse(JSON.parse(JSON.stringify(m)))).toEqual(m);
    }
    const lookalikes = [
      { reason: "size", bytes: 10 },
      { reason: "size", items: 2, bytes: 10 },
      { $dropped: { reason: "size", bytes: 10 }, other: 1 },
      { $dropped: { reason: "size", bytes: 10, extra: true } },
      { $dropped: { reason: "other", bytes: 10 } },
      { $dropped: { reason: "size", bytes: -1 } },
      { $dropped: { reason: "size", bytes: 1.5 } },
      { $dropped: { reason: "size", items: 0, bytes: 1 } },
      { $dropped: { reason: "size" } },
      { $dropped: [] },
      [{ reason: "size", bytes: 10 }],
      "size",
      null,
    ];
    for (const x of lookalikes) {
      expect(isDropped(x)).toBe(false);
      expect(DroppedSchema.safeParse(x).success).toBe(false);
    }
    // A payload with reason and bytes passes bound() untouched.
    const payload = { reason: "size", bytes: 10 };
    expect(bound(payload).value).toBe(payload);
  });
});

describe("property", () => {
  const jsonish = fc.oneof(
    fc.jsonValue({ maxDepth: 3 }),
    fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 80 }),
    fc.dictionary(fc.string({ unit: "grapheme", maxLength: 12 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 80 }),
    fc.array(fc.string({ unit: "grapheme", maxLength: 400 }), { maxLength: 30 }),
    fc.string({ unit: "grapheme", maxLength: 600 }),
  );

  it("any JSON value comes back inside the limit, in its shape, and bounding again changes nothing", () => {
    fc.assert(
      fc.property(jsonish, fc.integer({ min: MIN_BOUND_LIMIT, max: 1_024 }), (value, limit) => {
        const out = bound(value, limit);
        expect(bytesOf(out.value)).toBeLessThanOrEqual(limit);
        if (bytesOf(value) <= limit) {
          expect(out).toEqual({ value, truncated: false });
          return;
        }
        expect(out.truncated).toBe(true);
        if (Array.isArray(value)) {
          const list = out.value as unknown[];
          expect(Array.isArray(list)).toBe(true);
          // The head keeps its positions; only the last element may be the tail marker.
          list.slice(0, -1).forEach((x) => expect(isDropped(x) && x.$dropped.items !== undefined).toBe(false));
          list.forEach((item, i) => {
            if (!isDropped(item)) expect(item).toBe(value[i]);
          });
          expect(list.filter((x) => isDropped(x) && x.$dropped.items !== undefined).length).toBeLessThanOrEqual(1);
        } else if (value !== null && typeof value === "object") {
          const v = out.value as Record<string, unknown>;
          expect(isDropped(v) || (typeof v === "object" && !Array.isArray(v))).toBe(true);
          for (const [k, x] of Object.entries(v)) if (k !== "$dropped" && !isDropped(x)) expect(x).toBe((value as Record<string, unknown>)[k]);
        } else {
          expect(isDropped(out.value)).toBe(true);
        }
        const again = bound(out.value, limit);
        expect(again.truncated).toBe(false);
        expect(again.value).toBe(out.value);
      }),
      { numRuns: 1_000 },
    );
  });
});
