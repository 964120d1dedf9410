import { describe, expect, it } from "vitest";
import { EffectSchema } from "../../runtime/actor/define.js";
import { collectEffects } from "../../runtime/actor/emitted.js";

const emit = (event: unknown) => collectEffects([{ type: "xstate.emit", params: { event } }]);

const accepted: [string, Record<string, unknown>][] = [
  ["a store in the actor's partition", { type: "runway.store", key: "tenant.acme.member.r1", value: { at: 1 } }],
  ["a removal with a ttl in a bucket, last", { type: "runway.store", key: "live.p3.r1", value: null, ttl_ms: 60_000, bucket: "rw_live", last: true }],
  ["a send", { type: "runway.send", to: { kind: "tenant", id: "acme" }, event: { type: "run_ended", run: "r1" } }],
  ["a send, last", { type: "runway.send", to: { kind: "run", id: "r_1=x-y" }, event: { type: "start" }, last: true }],
];

const refused: [string, Record<string, unknown>][] = [
  ["a store key with a space", { type: "runway.store", key: "tenant.acme member", value: 1 }],
  ["a store key with an empty token", { type: "runway.store", key: "tenant..member", value: 1 }],
  ["a store key past 1,000 characters", { type: "runway.store", key: "k".repeat(1_001), value: 1 }],
  ["a store ttl that is not a positive integer", { type: "runway.store", key: "a.b", value: 1, ttl_ms: 1.5 }],
  ["a store ttl of zero", { type: "runway.store", key: "a.b", value: 1, ttl_ms: 0 }],
  ["a store bucket with a dot", { type: "runway.store", key: "a.b", value: 1, bucket: "rw.live" }],
  ["a store `last` that is not true", { type: "runway.store", key: "a.b", value: 1, last: false }],
  ["a send to a kind in capitals", { type: "runway.send", to: { kind: "Tenant", id: "acme" }, event: { type: "x" } }],
  ["a send to an id with a dot", { type: "runway.send", to: { kind: "tenant", id: "a.b" }, event: { type: "x" } }],
  ["a send without an address", { type: "runway.send", event: { type: "x" } }],
  ["a send of an event without a type", { type: "runway.send", to: { kind: "tenant", id: "acme" }, event: { run: "r1" } }],
  ["a send of an event with an empty type", { type: "runway.send", to: { kind: "tenant", id: "acme" }, event: { type: "" } }],
  ["a send of an array", { type: "runway.send", to: { kind: "tenant", id: "acme" }, event: [] }],
];

describe("collectEffects: a machine's sends and stores are checked as EffectSchema checks them", () => {
  it.each(accepted)("accepts %s as it is, without the schema's parse", (_name, effect) => {
    expect(EffectSchema.safeParse(effect).success).toBe(true);
    // The schema would hand back a copy: the very object means the field check accepted it.
    expect(emit(effect)[0]).toBe(effect);
  });
  it.each(refused)("refuses %s, saying why", (_name, effect) => {
    expect(EffectSchema.safeParse(effect).success).toBe(false);
    expect(() => emit(effect)).toThrow(/machine emitted an invalid effect/);
  });
});
