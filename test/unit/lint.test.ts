import { execFile } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { repoRoot } from "../harness/index.js";

const dir = mkdtempSync(join(tmpdir(), "runway-lint-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function file(path: string, text: string): void {
  mkdirSync(join(dir, path, ".."), { recursive: true });
  writeFileSync(join(dir, path), text);
}

it("the layering lint fails on an import cycle, a layer inversion, a reach past index.ts and I/O in machines/", async () => {
  copyFileSync(join(repoRoot, ".dependency-cruiser.cjs"), join(dir, ".dependency-cruiser.cjs"));
  copyFileSync(join(repoRoot, "tsconfig.json"), join(dir, "tsconfig.json"));
  file("runtime/index.ts", `export { a } from "./a.js";\n`);
  file("runtime/a.ts", `import { b } from "./b.js";\nexport const a = () => b;\n`);
  file("runtime/b.ts", `import { a } from "./a.js";\nexport const b = () => a;\n`);
  file("machines/index.ts", `import { a } from "../runtime/index.js";\nimport { readFileSync } from "node:fs";\nexport const m = [a, readFileSync];\n`);
  file("actors/index.ts", `import { b } from "../runtime/b.js";\nexport const x = b;\n`);
  const out = await new Promise<{ code: number; text: string }>((resolve) =>
    execFile(
      join(repoRoot, "node_modules", ".bin", "depcruise"),
      ["--config", ".dependency-cruiser.cjs", "machines", "runtime", "actors"],
      { cwd: dir },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, text: stdout + stderr }),
    ),
  );
  expect(out.code).not.toBe(0);
  expect(out.text).toContain("no-circular");
  expect(out.text).toContain("layering-machines");
  expect(out.text).toContain("public-surface-only");
  expect(out.text).toContain("machines-are-pure");
});
