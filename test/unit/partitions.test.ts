import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { partitionOf } from "../../runtime/index.js";
import { fnv1a32 } from "../../runtime/partitions/hash.js";
import { PLACEMENT_VERSION, placementFor, preferredOwner } from "../../runtime/partitions/placement.js";
import { natsCli } from "../harness/index.js";

describe("partition hashing", () => {
  it("FNV-1a 32 matches the published test vectors", () => {
    expect(fnv1a32("")).toBe(0x811c9dc5);
    expect(fnv1a32("a")).toBe(0xe40c292c);
    expect(fnv1a32("foobar")).toBe(0xbf9cf968);
  });

  it("places keys exactly where nats-server's partition() mapping does", async () => {
    const ids = ["a", "b", "run-01HZX", "tenant_42", "ünïcode", "x".repeat(60)];
    for (const id of ids) {
      // `nats server mapping` evaluates a subject mapping with the server's own code, offline.
      const r = await natsCli("nats://127.0.0.1:1", ["server", "mapping", "rw.*", "{{partition(32,1)}}", `rw.${id}`]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout.trim().split(/\s+/).pop()).toBe(String(partitionOf(id, 32)));
    }
  });

  it("rejects a non-positive partition count", () => {
    expect(() => partitionOf("a", 0)).toThrow(RangeError);
  });
});

describe("placement", () => {
  it("gives every partition to exactly one live node, and only live nodes", () => {
    fc.assert(
      fc.property(fc.uniqueArray(fc.stringMatching(/^[a-z0-9-]{1,12}$/), { minLength: 1, maxLength: 6 }), (nodes) => {
        const counts = nodes.map((n) => placementFor(n, nodes, 32).length);
        expect(counts.reduce((a, b) => a + b, 0)).toBe(32);
        for (let p = 0; p < 32; p++) expect(nodes).toContain(preferredOwner(p, nodes));
      }),
    );
  });

  it("moves only the leaving node's partitions when a node leaves", () => {
    const nodes = ["n1", "n2", "n3", "n4"];
    const before = Array.from({ length: 32 }, (_, p) => preferredOwner(p, nodes));
    const after = Array.from({ length: 32 }, (_, p) =>
      preferredOwner(
        p,
        nodes.filter((n) => n !== "n3"),
      ),
    );
    for (let p = 0; p < 32; p++) if (before[p] !== "n3") expect(after[p]).toBe(before[p]);
  });

  it("v2 spreads nodes whose names differ in one character; v1 (kept for clusters with older nodes) gave one of them everything", () => {
    const count = (names: string[], version: 1 | 2) => names.map((n) => placementFor(n, names, 32, version).length);
    expect(count(["w1c-0", "w1c-1"], 1)).toEqual([0, 32]);
    expect(PLACEMENT_VERSION).toBe(2);
    for (const names of [
      ["w1c-0", "w1c-1"],
      ["node-1", "node-2", "node-3"],
      ["runway-1", "runway-2", "runway-3", "runway-4"],
    ])
      for (const owned of count(names, 2)) expect(owned).toBeGreaterThanOrEqual(4);
    fc.assert(
      fc.property(fc.stringMatching(/^[a-z][a-z0-9-]{0,10}$/), (prefix) => {
        for (const owned of count([`${prefix}0`, `${prefix}1`], 2)) expect(owned).toBeGreaterThan(0);
      }),
    );
  });

  it("has no owner without live nodes", () => {
    expect(preferredOwner(0, [])).toBeUndefined();
  });
});
