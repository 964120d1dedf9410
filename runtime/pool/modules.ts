import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { Plugin } from "esbuild";

// What a pool's threads load and with which Node flags: the worker file, the handler modules
// (TypeScript bundled first), and the process's flags less a tsx loader.

/**
 * The modules a pool's threads load, as plain ES modules. TypeScript is bundled with esbuild into a
 * content-named file (relative imports inlined, packages kept as imports), because on Node 20 a thread
 * importing TypeScript through tsx needs a loader thread of its own, which makes a pool slow to start.
 */
export async function loadableModule(path: string): Promise<string> {
  if (!/\.[mc]?ts$/.test(path)) return path;
  // Imported here, not at load: the import is paid while the node connects and claims its
  // partitions (the pool starts beside them), and never by a CLI command that starts no pool.
  const { build } = await import("esbuild");
  const result = await build({
    entryPoints: [path],
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    packages: "external",
    sourcemap: "inline",
    write: false,
    logLevel: "silent",
    plugins: [ownImportMetaUrl],
  });
  const code = result.outputFiles[0]!.contents;
  const dir = cacheDirFor(path);
  const file = join(dir, `${basename(path).replace(/\.[mc]?ts$/, "")}-${createHash("sha256").update(code).digest("hex").slice(0, 16)}.mjs`);
  if (!existsSync(file)) {
    try {
      mkdirSync(dir, { recursive: true });
      // Written aside and renamed: a pool starting beside this one never reads half a file.
      const aside = `${file}.${process.pid}.${Math.random().toString(36).slice(2)}`;
      writeFileSync(aside, code);
      renameSync(aside, file);
    } catch (err) {
      throw new Error(`cannot keep the bundle of ${path} in ${dir} (${String(err)}): make it writable, or give the pool the module as JavaScript`, {
        cause: err,
      });
    }
  }
  return file;
}

/** `import.meta.url` as code: not inside a string (a quote right before or after), not part of a longer name. */
const IMPORT_META_URL = /(?<![\w$."'`])import\.meta\.url(?![\w$"'`])/g;

/** Each source keeps its own `import.meta.url`: a module that finds files next to itself still does. */
const ownImportMetaUrl: Plugin = {
  name: "own-import-meta-url",
  setup(b) {
    b.onLoad({ filter: /\.[mc]?ts$/ }, (args) => ({
      contents: readFileSync(args.path, "utf8").replace(IMPORT_META_URL, JSON.stringify(pathToFileURL(args.path).href)),
      loader: "ts",
    }));
  },
};

/**
 * Where a module's bundle goes: under the nearest `node_modules` above it, so the packages it
 * imports resolve from the bundle as they did from the source (a module with none above it
 * imports no package that resolves: a temporary directory does).
 */
function cacheDirFor(path: string): string {
  for (let dir = dirname(path); ; dir = dirname(dir)) {
    if (existsSync(join(dir, "node_modules"))) return join(dir, "node_modules", ".cache", "runway", "modules");
    if (dirname(dir) === dir) return join(tmpdir(), "runway-modules");
  }
}

/** The pool's worker file, next to this one: worker.ts when running from source, worker.js when built. */
export function workerFile(): string {
  const ts = import.meta.url.endsWith(".ts");
  const path = fileURLToPath(new URL(ts ? "./worker.ts" : "./worker.js", import.meta.url));
  if (!existsSync(path)) throw new Error(`StepPool worker file not found: ${path}`);
  return path;
}

/**
 * The pool threads' flags, with `require()` of an ES module off where Node has it: Node aborts the
 * whole process if a thread is terminated while `require()` links an ES module, and Piscina loads its
 * worker with `require()` first. With the flag Piscina imports the file instead, which a termination
 * stops cleanly. Cost: a CommonJS dependency that `require()`s an ES module fails to load.
 */
export function threadExecArgv(base: readonly string[]): string[] {
  const flag = "--no-experimental-require-module";
  if (!process.allowedNodeEnvironmentFlags.has("--experimental-require-module") || base.includes(flag)) return [...base];
  return [...base, flag];
}

/**
 * V8's flags Node also takes in NODE_OPTIONS (Node's docs list them). The rest of V8's flags are not
 * in `process.allowedNodeEnvironmentFlags` at all.
 */
const V8_FLAGS_NODE_ALLOWS = new Set([
  "--abort-on-uncaught-exception",
  "--disallow-code-generation-from-strings",
  "--enable-etw-stack-walking",
  "--expose-gc",
  "--huge-max-old-generation-size",
  "--interpreted-frames-native-stack",
  "--jitless",
  "--max-old-space-size",
  "--max-semi-space-size",
  "--perf-basic-prof-only-functions",
  "--perf-basic-prof",
  "--perf-prof-unwinding-info",
  "--perf-prof",
  "--stack-trace-limit",
]);

/** Whether `arg` is a flag of V8's (`--max-old-space-size=4096`, `--max-inlined-bytecode-size=300`) rather than of Node's. */
function isV8Flag(arg: string): boolean {
  const name = arg.split("=")[0]!.replace(/_/g, "-");
  return V8_FLAGS_NODE_ALLOWS.has(name) || !process.allowedNodeEnvironmentFlags.has(name);
}

/**
 * This process's Node flags for the threads, less a tsx loader (they load no TypeScript: it costs
 * each a loader thread) and less V8's flags: those are the process's, so the threads have them
 * already, and a thread given one does not start (`ERR_WORKER_INVALID_EXEC_ARGV`).
 */
export function threadFlagsOf(argv: readonly string[]): string[] {
  const out: string[] = [];
  const isTsx = (value: string | undefined) => value !== undefined && (/(^|[/\\@=])tsx([/\\]|$)/.test(value) || value === "tsx");
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if ((arg === "--import" || arg === "--require" || arg === "-r" || arg === "--loader") && isTsx(argv[i + 1])) {
      i++;
      continue;
    }
    if (/^--(import|require|loader)=/.test(arg) && isTsx(arg.slice(arg.indexOf("=") + 1))) continue;
    if (arg.startsWith("--") && isV8Flag(arg)) continue;
    out.push(arg);
  }
  return out;
}
