import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, expect, it } from "vitest";
import { loadableModule, threadExecArgv, threadFlagsOf } from "../../runtime/pool/modules.js";

const root = mkdtempSync(join(tmpdir(), "runway-modules-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function project(name: string): string {
  const dir = join(root, name);
  mkdirSync(join(dir, "node_modules"), { recursive: true });
  mkdirSync(join(dir, "src", "lib"), { recursive: true });
  writeFileSync(join(dir, "src", "lib", "where.ts"), "export const where = (): string => import.meta.url;\n");
  writeFileSync(
    join(dir, "src", "handlers.ts"),
    [
      'import { where } from "./lib/where.js";',
      'const label: string = "import.meta.url";',
      "export const handlers = { here: () => import.meta.url, lib: () => where(), label: () => label };",
      "",
    ].join("\n"),
  );
  return dir;
}

it("bundles a TypeScript module next to the nearest node_modules; each source keeps its own import.meta.url, words in a string stay", async () => {
  const dir = project("a");
  const source = join(dir, "src", "handlers.ts");
  const bundled = await loadableModule(source);
  expect(dirname(bundled)).toBe(join(dir, "node_modules", ".cache", "runway", "modules"));
  expect(bundled).toMatch(/handlers-[0-9a-f]{16}\.mjs$/);
  const mod = (await import(pathToFileURL(bundled).href)) as { handlers: Record<string, () => string> };
  expect(mod.handlers.here!()).toBe(pathToFileURL(source).href);
  expect(mod.handlers.lib!()).toBe(pathToFileURL(join(dir, "src", "lib", "where.ts")).href);
  expect(mod.handlers.label!()).toBe("import.meta.url");
  // Named by content: the same sources give the same file, written once.
  expect(await loadableModule(source)).toBe(bundled);
  expect(readdirSync(dirname(bundled)).filter((f) => f.endsWith(".mjs"))).toHaveLength(1);
});

it("loads a JavaScript module as it is", async () => {
  const file = join(root, "plain.mjs");
  writeFileSync(file, "export const handlers = {};\n");
  expect(await loadableModule(file)).toBe(file);
});

it("says where it could not keep a bundle, and what to do instead", async () => {
  const dir = project("b");
  // A node_modules that is a file: nothing can be kept under it, whoever runs this (root too).
  rmSync(join(dir, "node_modules"), { recursive: true });
  writeFileSync(join(dir, "node_modules"), "");
  await expect(loadableModule(join(dir, "src", "handlers.ts"))).rejects.toThrow(
    /cannot keep the bundle of .*handlers\.ts.*give the pool the module as JavaScript/,
  );
});

it("gives the threads this process's Node flags less a tsx loader, in every spelling, and less V8's flags (the process's: a thread given one does not start)", () => {
  const tsxUrl = "file:///app/node_modules/tsx/dist/esm/index.mjs";
  expect(
    threadFlagsOf([
      "--import",
      "tsx",
      "--max-old-space-size=100",
      "--max-inlined-bytecode-size=300",
      "--stack_trace_limit=20",
      "--enable-source-maps",
      `--import=${tsxUrl}`,
      "--require",
      "./other.cjs",
      "-r",
      "tsx/cjs",
      "--loader",
      "tsx",
      "--import",
      "./mine.mjs",
    ]),
  ).toEqual(["--enable-source-maps", "--require", "./other.cjs", "--import", "./mine.mjs"]);
});

it("turns require() of ES modules off in the threads where Node has it, once, after the given flags", () => {
  const has = process.allowedNodeEnvironmentFlags.has("--experimental-require-module");
  const off = has ? ["--no-experimental-require-module"] : [];
  expect(threadExecArgv([])).toEqual(off);
  expect(threadExecArgv(["--max-old-space-size=100"])).toEqual(["--max-old-space-size=100", ...off]);
  expect(threadExecArgv(["--no-experimental-require-module"])).toEqual(["--no-experimental-require-module"]);
});
