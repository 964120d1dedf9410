// The lint rule of issue 37 (acceptance 2): no `as` cast of an answer's value outside a decoder.
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterEach, describe, expect, it } from "vitest";

const SCRIPT = resolve("scripts/lint-casts.mjs");
const dirs: string[] = [];

function lint(files: Record<string, string>): { code: number; out: string } {
  const dir = mkdtempSync(join(tmpdir(), "lint-casts-"));
  dirs.push(dir);
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  try {
    execFileSync(process.execPath, [SCRIPT, dir], { stdio: "pipe", encoding: "utf8" });
    return { code: 0, out: "" };
  } catch (err) {
    const e = err as { status: number; stderr: string };
    return { code: e.status, out: e.stderr };
  }
}

afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe("lint-casts", () => {
  it("fails with file:line on a cast of an answer's value, either spelling, even across a line break", () => {
    const r = lint({
      "service.ts": [
        "const a = 1;",
        "const v = answer.value as { outcome: string };",
        "const w = <Thing>local.value;",
        "const x = (asked.value\n  as Thing);",
      ].join("\n"),
    });
    expect(r.code).toBe(1);
    expect(r.out).toMatch(/service\.ts:2: /);
    expect(r.out).toMatch(/service\.ts:3: /);
    expect(r.out).toMatch(/service\.ts:4: /);
  });

  it("passes a decoder's cast, a typed read, and a cast of a plain variable named value", () => {
    const r = lint({
      "wire.ts": "export const v = decoded.value as Envelope;",
      "service.ts": ["const v = answerOf<RunTypes, 'run.cancel', Asked<unknown>>(answer);", "const w = value as Record<string, unknown>;"].join("\n"),
    });
    expect(r).toEqual({ code: 0, out: "" });
  });
});
