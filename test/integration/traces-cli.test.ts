// `runway node` refuses a tracing endpoint that is not an http(s) URL, by flag or by the
// OpenTelemetry variables: one line on stderr, the usage exit code, before it connects anywhere.
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";
import { EXIT } from "../../cluster/cli-errors.js";
import { repoRoot } from "../harness/index.js";

const BIN = fileURLToPath(new URL("../../bin/runway.mjs", import.meta.url));

function runway(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stderr: string }> {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("RUNWAY_") && !k.startsWith("OTEL_"))) as Record<string, string>;
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { cwd: repoRoot, env: { ...clean, ...env }, timeout: 60_000 }, (err, _stdout, stderr) =>
      resolve({ code: err ? Number((err as { code?: unknown }).code ?? 1) : 0, stderr }),
    );
  });
}

it("a tracing endpoint that is not an http(s) URL is a usage error, by flag or by variable", async () => {
  const byFlag = await runway(["node", "--name", "n1", "--servers", "nats://127.0.0.1:1", "--otlp-endpoint", "collector:4318"]);
  expect(byFlag.code).toBe(EXIT.usage);
  expect(byFlag.stderr.trim().split("\n")).toHaveLength(1);
  expect(byFlag.stderr).toContain('--otlp-endpoint: an http(s) URL, not "collector:4318"');
  const byEnv = await runway(["node", "--name", "n1", "--servers", "nats://127.0.0.1:1"], { OTEL_EXPORTER_OTLP_ENDPOINT: "<script>" });
  expect(byEnv.code).toBe(EXIT.usage);
  expect(byEnv.stderr).toContain("OTEL_EXPORTER_OTLP_ENDPOINT: an http(s) URL");
  expect(byEnv.stderr).not.toMatch(/^\s+at /m);
}, 90_000);
