import { describe, expect, it } from "vitest";
import { OwnKeys } from "../../runtime/actor/own-keys.js";

const message = (seq: number) => ({ seq, data: new Uint8Array([seq]) });

describe("OwnKeys: what a partition's owner wrote, trusted only while its view of the partition holds", () => {
  it("answers a key it wrote, and a removed key as nothing", () => {
    const keys = new OwnKeys();
    keys.set("a", message(1), 0);
    keys.set("b", null, 0);
    expect(keys.get("a", 0, 0)).toEqual(message(1));
    expect(keys.get("b", 0, 0)).toBeNull();
    expect(keys.get("c", 0, 0)).toBeUndefined();
    expect(keys.stats).toEqual({ hits: 2, misses: 1 });
  });

  it("forgets everything when the log's generation moves on (a resync or a conflict), and ignores what an older generation learnt", () => {
    const keys = new OwnKeys();
    keys.set("a", message(1), 0);
    expect(keys.get("a", 1, 0)).toBeUndefined();
    keys.set("b", message(2), 1);
    expect(keys.get("a", 1, 0)).toBeUndefined();
    keys.set("a", message(3), 0);
    expect(keys.get("a", 1, 0)).toBeUndefined();
    expect(keys.get("b", 1, 0)).toEqual(message(2));
  });

  it("a read never hides a write learnt meanwhile; a write replaces what a read learnt", () => {
    const keys = new OwnKeys();
    keys.set("a", message(2), 0);
    keys.set("a", message(1), 0, undefined, true);
    expect(keys.get("a", 0, 0)).toEqual(message(2));
    keys.set("b", message(1), 0, undefined, true);
    keys.set("b", message(5), 0);
    expect(keys.get("b", 0, 0)).toEqual(message(5));
  });

  it("a key written with a TTL is forgotten when it expires; a forgotten key is read again", () => {
    const keys = new OwnKeys();
    keys.set("a", message(1), 0, 1_000);
    expect(keys.get("a", 0, 999)).toEqual(message(1));
    expect(keys.get("a", 0, 1_000)).toBeUndefined();
    keys.set("b", message(1), 0);
    keys.forget("b");
    expect(keys.get("b", 0, 0)).toBeUndefined();
  });

  it("is bounded: past its limit it starts over", () => {
    const keys = new OwnKeys(3);
    for (let i = 0; i < 3; i++) keys.set(`k${i}`, message(i), 0);
    keys.set("k3", message(3), 0);
    expect(keys.get("k0", 0, 0)).toBeUndefined();
    expect(keys.get("k3", 0, 0)).toEqual(message(3));
  });
});
