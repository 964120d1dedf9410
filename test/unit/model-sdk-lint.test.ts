// The lint keeps the provider SDKs where they belong: loaded on first use by gateways/models/sdk.ts
// only, their wire types never outside gateways/models/ (so machines/ and runtime/ stay free of them).
import { execFile } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { repoRoot } from "../harness/index.js";

const dir = mkdtempSync(join(tmpdir(), "runway-lint-models-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function file(path: string, text: string): void {
  mkdirSync(join(dir, path, ".."), { recursive: true });
  writeFileSync(join(dir, path), text);
}

it("the lint refuses a provider SDK outside gateways/models/sdk.ts, and its types outside gateways/models/", async () => {
  copyFileSync(join(repoRoot, ".dependency-cruiser.cjs"), join(dir, ".dependency-cruiser.cjs"));
  copyFileSync(join(repoRoot, "tsconfig.json"), join(dir, "tsconfig.json"));
  symlinkSync(join(repoRoot, "node_modules"), join(dir, "node_modules"));
  file("gateways/models/sdk.ts", `export const load = () => import("openai");\n`);
  file("gateways/models/types.ts", `import type { Message } from "@anthropic-ai/sdk/resources/messages";\nexport type M = Message;\n`);
  file("gateways/models/eager.ts", `import OpenAI from "openai";\nexport const o = OpenAI;\n`);
  file("runtime/index.ts", `import Anthropic from "@anthropic-ai/sdk";\nexport const a = Anthropic;\n`);
  file("machines/index.ts", `import type { ChatCompletion } from "openai/resources/chat/completions";\nexport type C = ChatCompletion;\n`);
  const out = await new Promise<{ code: number; text: string }>((resolve) =>
    execFile(
      join(repoRoot, "node_modules", ".bin", "depcruise"),
      ["--config", ".dependency-cruiser.cjs", "machines", "runtime", "gateways"],
      { cwd: dir },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, text: stdout + stderr }),
    ),
  );
  expect(out.code).not.toBe(0);
  const lines = out.text.split("\n").filter((l) => /error model-sdk/.test(l));
  expect(lines.some((l) => l.includes("model-sdks-on-first-use: gateways/models/eager.ts"))).toBe(true);
  expect(lines.some((l) => l.includes("model-sdks-on-first-use: runtime/index.ts"))).toBe(true);
  expect(lines.some((l) => l.includes("model-sdk-types-in-the-gateway: runtime/index.ts"))).toBe(true);
  expect(lines.some((l) => l.includes("model-sdk-types-in-the-gateway: machines/index.ts"))).toBe(true);
  expect(lines.some((l) => l.includes("gateways/models/sdk.ts") || l.includes("gateways/models/types.ts"))).toBe(false);
});
