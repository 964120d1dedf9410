#!/usr/bin/env node
// The `runway` command (`npx runway …`, `./bin/runway.mjs …`, `npm run runway -- …`).
//
// It runs cluster/cli.ts in this very process, so a signal sent to `runway` (SIGTERM, SIGINT)
// reaches the node itself and drains it. The sources are bundled into one ES module (esbuild,
// tsx's own transformer) and that is imported: loading ~150 TypeScript modules one at a time
// through tsx's loader thread took ~0.4 s more of every start, a node's restart included. The
// bundle and its source map are kept under node_modules/.cache/runway, named by the sources
// they were made of (path, size and mtime of every .ts file), so it always runs the sources as
// they are now, never a `dist/` that may be older; a changed source makes a new bundle (~0.2 s,
// once). Should the bundle not build, tsx runs the sources directly.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const SOURCES = ["machines", "runtime", "actors", "gateways", "cluster"];
const cache = join(root, "node_modules", ".cache", "runway");

/** Names the sources as they are now: every .ts file's path, size and mtime, and this file. */
function sourcesKey() {
  const hash = createHash("sha256").update(readFileSync(fileURLToPath(import.meta.url)));
  for (const dir of SOURCES) {
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

/** The bundle of the sources as they are now: built unless it is there already. */
async function bundle() {
  const file = join(cache, `cli-${sourcesKey()}.mjs`);
  if (existsSync(file)) return file;
  const { build } = await import("esbuild");
  const result = await build({
    entryPoints: [join(root, "cluster", "cli.ts")],
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    packages: "external",
    // A map of its own, without the sources' text: the bundle is a quarter of the size, and Node
    // reads a far smaller map at every start (an inline one with the sources' text made the file
    // 2.6 MB and cost a node's start ~90 ms).
    sourcemap: "linked",
    sourcesContent: false,
    outfile: file,
    write: false,
    logLevel: "silent",
    plugins: [ownUrls],
  });
  mkdirSync(cache, { recursive: true });
  // Written aside and renamed, the map first, so a `runway` starting beside this one never reads
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
  // Then older bundles go (a process that runs one has it loaded already): only those made over
  // a minute ago, since a `runway` started just now may be about to import the one it made, and
  // never a file still being written aside.
  for (const old of readdirSync(cache)) {
    const path = join(cache, old);
    if (!/^cli-[0-9a-f]+\.mjs(\.map)?$/.test(old) || path === file || path === `${file}.map`) continue;
    try {
      if (Date.now() - statSync(path).mtimeMs > 60_000) rmSync(path, { force: true });
    } catch {
      // Gone already: another `runway` cleaned up.
    }
  }
  return file;
}

let bundled;
try {
  bundled = await bundle();
} catch (err) {
  const why = err?.errors?.[0] ? `${err.errors[0].text} (${err.errors[0].location?.file}:${err.errors[0].location?.line})` : String(err);
  process.stderr.write(`runway: running the sources through tsx (no bundle: ${why})\n`);
}
if (bundled) {
  // Stack traces name the .ts sources, as under tsx.
  process.setSourceMapsEnabled(true);
  await import(pathToFileURL(bundled).href);
} else {
  const { register } = await import("tsx/esm/api");
  register();
  await import("../cluster/cli.ts");
}
