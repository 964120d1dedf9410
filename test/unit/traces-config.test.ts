import { describe, expect, it } from "vitest";
import { tracesFromEnv, tracesUrlOf } from "../../gateways/index.js";

describe("the traces setting of the environment (docs/traces.md)", () => {
  it("is off unless an OTLP endpoint is set", () => {
    expect(tracesFromEnv({})).toEqual({});
    expect(tracesFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: "" })).toEqual({});
    expect(tracesFromEnv({ OTEL_SERVICE_NAME: "svc" })).toEqual({});
  });

  it("reads the traces endpoint as is, a base endpoint with /v1/traces, the service name and headers", () => {
    expect(tracesFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318/" }).config).toEqual({ url: "http://c:4318/v1/traces" });
    expect(
      tracesFromEnv({
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://ignored:4318",
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "https://c/otlp/traces",
        OTEL_SERVICE_NAME: "orders",
        OTEL_EXPORTER_OTLP_HEADERS: "x-api-key=a%20b, bad ,k2=v2",
      }).config,
    ).toEqual({ url: "https://c/otlp/traces", serviceName: "orders", headers: { "x-api-key": "a b", k2: "v2" } });
    expect(tracesUrlOf("http://c:4318", true)).toBe("http://c:4318/v1/traces");
  });

  it("is off when the SDK is disabled or the traces exporter is none, whatever the endpoint", () => {
    expect(tracesFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_SDK_DISABLED: "true" })).toEqual({});
    expect(tracesFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_TRACES_EXPORTER: "none" })).toEqual({});
  });

  it("reads the payload's protocol (protobuf unless http/json is asked for) and refuses another, saying which variable", () => {
    const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318" };
    expect(tracesFromEnv({ ...endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf" }).config).toEqual({
      url: "http://c:4318/v1/traces",
      protocol: "http/protobuf",
    });
    expect(tracesFromEnv({ ...endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf", OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: " HTTP/JSON " }).config).toEqual({
      url: "http://c:4318/v1/traces",
      protocol: "http/json",
    });
    for (const [variable, bad] of [
      ["OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"],
      ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "<script>"],
    ] as const) {
      const read = tracesFromEnv({ ...endpoint, [variable]: bad });
      expect(read.config).toBeUndefined();
      expect(read.refusal).toBe(`${variable}: http/protobuf or http/json, not ${JSON.stringify(bad)}`);
    }
  });

  it("refuses an endpoint that is not an http(s) URL, saying which variable", () => {
    for (const bad of ["c:4318", "ftp://c/traces", "<script>", "not a url"]) {
      const read = tracesFromEnv({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: bad });
      expect(read.config).toBeUndefined();
      expect(read.refusal).toContain("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: an http(s) URL");
    }
  });
});
