import { describe, expect, it } from "vitest";
import { z } from "zod";
import { actorRecordCodec, isFault, type ActorRecord } from "../../runtime/index.js";
import { MAX_ENCODED_DEPTH, packMsgpack, versionedCodec } from "../../runtime/codec.js";

const body = z.object({ n: z.number(), tags: z.array(z.string()) });

describe("versioned codec", () => {
  for (const format of ["msgpack", "json"] as const) {
    it(`round-trips a body with its schema and version (${format})`, () => {
      const codec = versionedCodec({ schema: "t.thing", version: 2, body, format });
      const decoded = codec.decode(codec.encode({ n: 1, tags: ["a"] }));
      expect(decoded).toEqual({ ok: true, value: { n: 1, tags: ["a"] } });
    });
  }

  it("refuses bytes that are not an envelope", () => {
    const codec = versionedCodec({ schema: "t.thing", version: 1, body });
    expect(codec.decode(new Uint8Array([0x82, 0xa1]))).toMatchObject({ ok: false, reason: "bad_encoding" });
    expect(codec.decode(packMsgpack(42))).toMatchObject({ ok: false, reason: "bad_encoding" });
  });

  it("refuses another schema or version instead of misreading it", () => {
    const v1 = versionedCodec({ schema: "t.thing", version: 1, body });
    const v2 = versionedCodec({ schema: "t.thing", version: 2, body });
    const other = versionedCodec({ schema: "t.other", version: 1, body });
    expect(v2.decode(v1.encode({ n: 1, tags: [] }))).toMatchObject({ ok: false, reason: "unsupported_schema" });
    expect(other.decode(v1.encode({ n: 1, tags: [] }))).toMatchObject({ ok: false, reason: "unsupported_schema" });
  });

  it("validates the body with zod", () => {
    const codec = versionedCodec({ schema: "t.thing", version: 1, body });
    const forged = packMsgpack({ s: "t.thing", v: 1, b: { n: "one", tags: [] } });
    expect(codec.decode(forged)).toMatchObject({ ok: false, reason: "invalid_body" });
  });

  it("an actor record's outbox holds best-effort runway.event entries beside durable ones, and records written before them still decode", () => {
    const record: ActorRecord = {
      kind: "run",
      id: "t1_abc",
      snapshot: { value: "active" },
      applied: ["cmd-1"],
      outbox: [
        { id: "cmd-1/0", effect: { type: "runway.event", subject: "rw.evt.t1.r.r.step_started", data: { type: "step_started" } } },
        { id: "cmd-1/1", effect: { type: "runway.send", to: { kind: "run", id: "t1_parent" }, event: { type: "run.child_done" } } },
      ],
      transitions: 1,
      writer: { node: "n1", epoch: 3 },
      at: 1,
    };
    expect(actorRecordCodec.decode(actorRecordCodec.encode(record))).toEqual({ ok: true, value: record });
    // Before runway.event, progress events were stored as runway.publish: such a record loads, and its
    // entries are published durably as they were written.
    const older = { ...record, outbox: [{ id: "cmd-1/0", effect: { type: "runway.publish", subject: "rw.evt.t1.r.r.step_started", data: {} } }] };
    expect(actorRecordCodec.decode(packMsgpack({ s: "rw.actor", v: 1, b: older }))).toEqual({ ok: true, value: older });
  });

  it(`refuses to encode a body nested past ${MAX_ENCODED_DEPTH} levels, whatever the encoder's stack would survive`, () => {
    const any = versionedCodec({ schema: "t.any", version: 1, body: z.unknown() });
    const nested = (levels: number) => {
      let v: unknown = 1;
      for (let i = 0; i < levels; i++) v = { a: v };
      return v;
    };
    // The envelope is the first level.
    expect(any.decode(any.encode(nested(MAX_ENCODED_DEPTH - 1)))).toEqual({ ok: true, value: nested(MAX_ENCODED_DEPTH - 1) });
    for (const levels of [MAX_ENCODED_DEPTH, 1_000, 100_000]) {
      let thrown: unknown;
      try {
        any.encode(nested(levels));
      } catch (err) {
        thrown = err;
      }
      expect(isFault(thrown) && thrown.code).toBe("too_deep");
    }
  });
});
