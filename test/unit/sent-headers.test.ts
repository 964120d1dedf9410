import { headers as natsHeaders, Match, type MsgHdrs, type MsgHdrsImpl } from "@nats-io/transport-node";
import { describe, expect, it } from "vitest";
import { headerBytes } from "../../runtime/nats/jetstream.js";
import { sentHeaders } from "../../runtime/nats/headers.js";

type Op = ["set" | "append", string, string] | ["delete", string];

/** The same operations on nats.js's headers and ours: what the server would receive from each. */
function both(ops: Op[]) {
  const theirs = natsHeaders();
  const ours = sentHeaders();
  for (const op of ops) {
    if (op[0] === "delete") {
      theirs.delete(op[1]);
      ours.delete(op[1]);
    } else {
      theirs[op[0]](op[1], op[2]);
      ours[op[0]](op[1], op[2]);
    }
  }
  return { theirs: theirs as MsgHdrsImpl, ours };
}

describe("headers of sent messages (runtime/nats/headers.ts)", () => {
  const cases: [string, Op[]][] = [
    ["none", []],
    ["one", [["set", "Rw-Id", "abc/1"]]],
    [
      "a KV write's",
      [
        ["set", "Rw-Writer", "node-a/3"],
        ["set", "Nats-Rollup", "sub"],
        ["set", "Nats-Expected-Last-Sequence", "42"],
      ],
    ],
    [
      "set again replaces, in place of the first",
      [
        ["set", "A", "1"],
        ["set", "B", "2"],
        ["set", "A", "3"],
      ],
    ],
    [
      "appended values stay with their key",
      [
        ["append", "A", "1"],
        ["append", "B", "2"],
        ["append", "A", "3"],
      ],
    ],
    [
      "values trimmed, deleted keys gone",
      [
        ["set", "A", "  x  "],
        ["set", "B", "y"],
        ["delete", "A"],
      ],
    ],
  ];

  it.each(cases)("encode the bytes nats.js encodes: %s", (_name, ops) => {
    const { theirs, ours } = both(ops);
    expect(Buffer.from(ours.encode()).toString()).toBe(Buffer.from(theirs.encode()).toString());
    // What a publish is sized by: the block's bytes, as nats.js sends it.
    expect(headerBytes(ours)).toBe(theirs.encode().length);
    expect([...ours]).toEqual([...theirs]);
    expect(ours.keys()).toEqual(theirs.keys());
  });

  it("encode again after a change: a block sized before a header is added is not the one sent", () => {
    const h = sentHeaders();
    h.set("Rw-Writer", "n/1");
    const sized = headerBytes(h);
    h.set("Nats-Expected-Last-Sequence", "7");
    h.delete("Rw-Writer");
    expect(Buffer.from(h.encode()).toString()).toBe("NATS/1.0\r\nNats-Expected-Last-Sequence: 7\r\n\r\n");
    expect(headerBytes(h)).not.toBe(sized);
  });

  it("read back as nats.js reads them", () => {
    const { theirs, ours } = both([
      ["set", "Nats-Msg-Id", "m1"],
      ["append", "X", "1"],
      ["append", "X", "2"],
    ]);
    const readers: MsgHdrs[] = [theirs, ours];
    for (const h of readers) {
      expect(h.get("Nats-Msg-Id")).toBe("m1");
      expect(h.get("nats-msg-id")).toBe("");
      expect(h.get("nats-msg-id", Match.IgnoreCase)).toBe("m1");
      expect(h.get("nats-msg-id", Match.CanonicalMIME)).toBe("m1");
      expect(h.has("X")).toBe(true);
      expect(h.values("X")).toEqual(["1", "2"]);
      expect(h.last("X")).toBe("2");
      expect(h.get("Missing")).toBe("");
      expect(h.code).toBe(0);
      expect(h.hasError).toBe(false);
    }
  });

  it("refuse what nats.js refuses: a value with CR or LF, a name with a colon or a space", () => {
    for (const make of [natsHeaders, sentHeaders]) {
      expect(() => make().set("A", "x\r\nInjected: y")).toThrow(/\\r or \\n/);
      expect(() => make().set("A:B", "x")).toThrow(/not a valid character/);
      expect(() => make().set("A B", "x")).toThrow(/not a valid character/);
    }
  });
});
