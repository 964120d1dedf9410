import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SpanRecord } from "../../actors/index.js";
import { startTraceExporter, type TracesConfig } from "../../gateways/index.js";
import { SPAN_KIND_SERVER, startOtlpReceiver, STATUS_ERROR, type OtlpReceiver } from "../fixtures/otlp.js";

/**
 * The node's span exporter (gateways/telemetry/exporter.ts) against the test receiver process,
 * each payload it can send: a span record arrives with the ids, parent, kind, times, status,
 * attributes and resource it was emitted with, as OTLP protobuf (the default) and as OTLP JSON.
 */

let receiver: OtlpReceiver;

beforeAll(async () => {
  receiver = await startOtlpReceiver();
}, 60_000);

afterAll(async () => {
  await receiver?.process.kill("SIGTERM").catch(() => undefined);
});

function records(tag: string): SpanRecord[] {
  const trace = tag === "json" ? "0af7651916cd43dd8448eb211c80319c" : "1bf7651916cd43dd8448eb211c80319d";
  return [
    {
      name: `run wf-${tag}`,
      trace_id: trace,
      span_id: "00f067aa0ba902b7",
      parent_span_id: "b7ad6b7169203331",
      remote_parent: true,
      kind: "server",
      start: 1_765_000_000_123,
      end: 1_765_000_000_456,
      error: "boom: it failed",
      attributes: {
        "runway.run.id": `r-${tag}`,
        "runway.definition.version": 3,
        "runway.flag": true,
        "gen_ai.response.finish_reasons": ["end_turn", "x"],
        "runway.ratio": 0.25,
      },
    },
    {
      name: `step a-${tag}`,
      trace_id: trace,
      span_id: "0000000000000001",
      parent_span_id: "00f067aa0ba902b7",
      kind: "internal",
      start: 1_765_000_000_200,
      // An end before the start (clocks of two nodes) is clamped to the start, as the SDK's spans do.
      end: 1_765_000_000_100,
      attributes: { "runway.run.id": `r-${tag}`, "runway.attempt": 1 },
    },
  ];
}

describe("the span exporter's payloads (docs/traces.md)", () => {
  for (const protocol of ["http/protobuf", "http/json"] as const)
    it(`${protocol}: a span record arrives as it was emitted`, async () => {
      const tag = protocol === "http/json" ? "json" : "protobuf";
      const config: TracesConfig = { url: `${receiver.endpoint}/v1/traces`, serviceName: "svc", ...(protocol === "http/json" ? { protocol } : {}) };
      const exporter = await startTraceExporter(config, `node-${tag}`);
      for (const r of records(tag)) exporter.emit(r);
      await exporter.shutdown();
      expect(exporter.dropped()).toBe(0);
      const got = await receiver.traceOf(`r-${tag}`, (all) => all.length === 2);
      const run = got.find((s) => s.name === `run wf-${tag}`)!;
      const step = got.find((s) => s.name === `step a-${tag}`)!;
      expect(run).toMatchObject({
        traceId: records(tag)[0]!.trace_id,
        spanId: "00f067aa0ba902b7",
        parentSpanId: "b7ad6b7169203331",
        kind: SPAN_KIND_SERVER,
        start: 1_765_000_000_123,
        end: 1_765_000_000_456,
        status: STATUS_ERROR,
        message: "boom: it failed",
        attributes: records(tag)[0]!.attributes,
        resource: { "service.name": "svc", "service.instance.id": `node-${tag}` },
      });
      expect(step).toMatchObject({
        spanId: "0000000000000001",
        parentSpanId: "00f067aa0ba902b7",
        kind: 1,
        start: 1_765_000_000_200,
        end: 1_765_000_000_200,
        status: 0,
      });
      expect(step.attributes).toEqual({ "runway.run.id": `r-${tag}`, "runway.attempt": 1 });
    });
});
