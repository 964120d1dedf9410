// One ES module made of an entry point and every source it imports (esbuild, tsx's own
// transformer), kept under node_modules/.cache/runway and named by the sources it was made of
// (path, size and mtime of every .ts file under the given folders), so it always runs the
// sources as they are now; a changed source makes a new bundle, once. What `runway`
// runs (bin/runway.mjs) and what `npm run bench` measures (test/bench/run.mjs).
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));

/** The folders of the product's sources: what `runway` bundles, and with `test` what `npm run bench` does. */
export const SOURCE_DIRS = ["machines", "runtime", "actors", "gateways", "cluster"];
const cache = join(root, "node_modules", ".cache", "runway");

/** Names the sources as they are now: the entry, every .ts file's path, size and mtime under `dirs`, and this file. */
function sourcesKey(entry, dirs) {
  const hash = createHash("sha256")
    .update(readFileSync(fileURLToPath(import.meta.url)))
    .update(`${entry}\n`);
  for (const dir of dirs) {
    const files = readdirSync(join(root, dir), { recursive: true })
      .filter((f) => f.endsWith(".ts"))
      .sort();
    for (const f of files) {
      const s = statSync(join(root, dir, f));
      hash.update(`${dir}/${f} ${s.size} ${s.mtimeMs}\n`);
    }
  }
  return hash.digest("hex").slice(0, 20);
}

/** `import.meta.url` as code: not inside a string (a quote right before or after), not part of a longer name. */
const IMPORT_META_URL = /(?<![\w$."'`])import\.meta\.url(?![\w$"'`])/g;

/** Each source keeps its own `import.meta.url` (files found next to it: the pool's worker, the demo's handlers). */
const ownUrls = {
  name: "own-import-meta-url",
  setup(build) {
    build.onLoad({ filter: /\.ts$/ }, (args) => ({
      contents: readFileSync(args.path, "utf8").replace(IMPORT_META_URL, JSON.stringify(pathToFileURL(args.path).href)),
      loader: "ts",
    }));
  },
};

/**
 * The bundle `<name>-<key>.mjs` of `entry` (a path from the project's root) as its sources under
 * `dirs` are now: built unless it is there already. Returns its path.
 */
export async function bundleOf(name, entry, dirs) {
  const file = join(cache, `${name}-${sourcesKey(entry, dirs)}.mjs`);
  if (existsSync(file)) return file;
  const { build } = await import("esbuild");
  const result = await build({
    entryPoints: [join(root, entry)],
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    packages: "external",
    // A map of its own, without the sources' text: Node reads a far smaller file at every start
    // than a bundle with an inline map and the sources in it.
    sourcemap: "linked",
    sourcesContent: false,
    outfile: file,
    write: false,
    logLevel: "silent",
    plugins: [ownUrls],
  });
  mkdirSync(cache, { recursive: true });
  // Written aside and renamed, the map first, so a process starting beside this one never reads
  // half a file nor a bundle without its map.
  const output = (suffix) => result.outputFiles.find((f) => f.path.endsWith(suffix)).contents;
  for (const [target, contents] of [
    [`${file}.map`, output(".mjs.map")],
    [file, output(".mjs")],
  ]) {
    const aside = `${target}.${process.pid}`;
    writeFileSync(aside, contents);
    renameSync(aside, target);
  }
  // Then older bundles of the same name go (a process that runs one has it loaded already): only
  // those made over a minute ago, since a process started just now may be about to import the one
  // it made, and never a file still being written aside.
  const older = new RegExp(`^${name}-[0-9a-f]+\\.mjs(\\.map)?$`);
  for (const old of readdirSync(cache)) {
    const path = join(cache, old);
    if (!older.test(old) || path === file || path === `${file}.map`) continue;
    try {
      if (Date.now() - statSync(path).mtimeMs > 60_000) rmSync(path, { force: true });
    } catch {
      // Gone already: another process cleaned up.
    }
  }
  return file;
}

/** Why a bundle did not build, in a line. */
function whyNotBuilt(err) {
  return err?.errors?.[0] ? `${err.errors[0].text} (${err.errors[0].location?.file}:${err.errors[0].location?.line})` : String(err);
}

let tsxRegistered = false;

/** Lets this process import TypeScript sources (tsx's loader), once. */
async function registerTsx() {
  if (tsxRegistered) return;
  (await import("tsx/esm/api")).register();
  tsxRegistered = true;
}

/**
 * Runs `entry` in this process from its bundle (source maps on: stack traces name the .ts
 * sources, as under tsx) or, should the bundle not build, from its sources through tsx, saying
 * why on stderr as `<who>: …`. `withTsx` registers tsx either way, for code that imports sources
 * at run time.
 */
export async function runBundled(who, name, entry, dirs, { withTsx = false } = {}) {
  if (withTsx) await registerTsx();
  let bundled;
  try {
    bundled = await bundleOf(name, entry, dirs);
  } catch (err) {
    process.stderr.write(`${who}: running the sources through tsx (no bundle: ${whyNotBuilt(err)})\n`);
  }
  if (bundled) {
    process.setSourceMapsEnabled(true);
    await import(pathToFileURL(bundled).href);
    return;
  }
  await registerTsx();
  await import(pathToFileURL(join(root, entry)).href);
}
