import { describe, expect, it } from "vitest";
import { EventSpool, type PublishOutcome, type SpooledEvent } from "../../runtime/index.js";
import { waitFor } from "../harness/index.js";

/**
 * The event spool against a fake stream (the spool is a pure component around a publish
 * function): an outage, ordering, the bound and drop counting. The real stream is exercised by
 * test/integration/events-outage.test.ts.
 */
function fakeStream() {
  const stream = {
    down: false,
    refuse: new Set<string>(),
    stored: [] as SpooledEvent[],
    ids: new Set<string>(),
    attemptsWhileDown: 0,
    publish: async (e: SpooledEvent): Promise<PublishOutcome> => {
      await new Promise((r) => setImmediate(r));
      if (stream.down) {
        stream.attemptsWhileDown++;
        return { outcome: "unavailable", detail: "no responders" };
      }
      if (stream.refuse.has(e.subject)) return { outcome: "rejected", code: 10077, detail: "maximum messages exceeded" };
      const duplicate = stream.ids.has(e.id);
      if (!duplicate) {
        stream.ids.add(e.id);
        stream.stored.push(e);
      }
      return { outcome: "stored", seq: stream.stored.length, duplicate };
    },
  };
  return stream;
}

const event = (lane: string, n: number, bytes = 10): SpooledEvent => ({ id: `${lane}/${n}`, subject: `rw.evt.t.${lane}.${n}`, data: new Uint8Array(bytes) });
const fast = { retryBaseMs: 1, retryMaxMs: 8 };

describe("event spool", () => {
  it("C129 spool: events offered during an outage are published in order per lane once the stream answers", async () => {
    const stream = fakeStream();
    stream.down = true;
    const spool = new EventSpool({ publish: stream.publish, batch: 8, ...fast });
    const lanes = ["a", "b", "c"];
    for (let n = 0; n < 100; n++) for (const lane of lanes) spool.offer(lane, event(lane, n));
    expect(spool.spooled).toBe(300);
    // The outage is probed by one lane at a time, not by every lane and every event.
    await waitFor(() => stream.attemptsWhileDown >= 10, { timeoutMs: 5_000, describe: "a few probes while the stream is down" });
    expect(spool.stats.published).toBe(0);
    expect(spool.spooled).toBe(300);
    stream.down = false;
    await waitFor(() => spool.spooled === 0, { timeoutMs: 5_000, describe: "the spool to drain" });
    expect(spool.stats.published).toBe(300);
    expect(spool.stats.dropped).toEqual({ full: 0, rejected: 0, stopped: 0 });
    for (const lane of lanes) {
      const order = stream.stored.filter((e) => e.id.startsWith(`${lane}/`)).map((e) => Number(e.id.split("/")[1]));
      expect(order).toEqual([...Array(100).keys()]);
    }
  });

  it("C129 spool: beyond maxEvents the newest events are dropped and counted; what is published is a prefix", async () => {
    const stream = fakeStream();
    stream.down = true;
    const spool = new EventSpool({ publish: stream.publish, maxEvents: 5, ...fast });
    for (let n = 0; n < 8; n++) spool.offer("a", event("a", n));
    expect(spool.spooled).toBe(5);
    expect(spool.stats.dropped.full).toBe(3);
    stream.down = false;
    await waitFor(() => spool.spooled === 0, { timeoutMs: 5_000, describe: "the spool to drain" });
    expect(stream.stored.map((e) => e.id)).toEqual(["a/0", "a/1", "a/2", "a/3", "a/4"]);
    // Room again: new events are taken.
    spool.offer("a", event("a", 9));
    await waitFor(() => stream.stored.length === 6, { timeoutMs: 5_000, describe: "the next event" });
    expect(spool.stats).toEqual({ published: 6, dropped: { full: 3, rejected: 0, stopped: 0 } });
  });

  it("C129 spool: beyond maxBytes an event is dropped and counted", () => {
    const stream = fakeStream();
    stream.down = true;
    const spool = new EventSpool({ publish: stream.publish, maxBytes: 100, ...fast });
    spool.offer("a", event("a", 0, 60)); // 60 + subject
    spool.offer("a", event("a", 1, 60));
    expect(spool.spooled).toBe(1);
    expect(spool.stats.dropped.full).toBe(1);
    return spool.close(0);
  });

  it("C129 spool: a refused event is dropped and counted at once; the lane goes on", async () => {
    const stream = fakeStream();
    stream.refuse.add("rw.evt.t.a.1");
    const spool = new EventSpool({ publish: stream.publish, batch: 1, ...fast });
    for (let n = 0; n < 3; n++) spool.offer("a", event("a", n));
    await waitFor(() => spool.spooled === 0, { timeoutMs: 5_000, describe: "the spool to drain" });
    expect(stream.stored.map((e) => e.id)).toEqual(["a/0", "a/2"]);
    expect(spool.stats).toEqual({ published: 2, dropped: { full: 0, rejected: 1, stopped: 0 } });
  });

  it("C129 spool: an event offered again while held is ignored (a record's outbox re-published on load)", async () => {
    const stream = fakeStream();
    stream.down = true;
    const spool = new EventSpool({ publish: stream.publish, ...fast });
    spool.offer("a", event("a", 0));
    spool.offer("a", event("a", 0));
    expect(spool.spooled).toBe(1);
    stream.down = false;
    await waitFor(() => spool.spooled === 0, { timeoutMs: 5_000, describe: "the spool to drain" });
    expect(stream.stored).toHaveLength(1);
  });

  it("C129 spool: close flushes what it can, then drops and counts the rest", async () => {
    const stream = fakeStream();
    const spool = new EventSpool({ publish: stream.publish, ...fast });
    spool.offer("a", event("a", 0));
    await spool.close(5_000);
    expect(stream.stored).toHaveLength(1);

    const down = fakeStream();
    down.down = true;
    const stuck = new EventSpool({ publish: down.publish, ...fast });
    for (let n = 0; n < 4; n++) stuck.offer("a", event("a", n));
    await stuck.close(20);
    expect(stuck.spooled).toBe(0);
    expect(stuck.stats.dropped.stopped).toBe(4);
    stuck.offer("a", event("a", 9));
    expect(stuck.stats.dropped.stopped).toBe(5);
  });
});
