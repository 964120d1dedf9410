// A folder's index.ts (and each room's inside actors/) is its public surface: explicit named
// exports only, each imported by some file outside that folder or room (tests included).
// Run by `npm run lint`.
import fs from "node:fs";
import path from "node:path";

const FOLDERS = ["machines", "runtime", "actors", "gateways", "cluster"];
const SCANNED = [...FOLDERS, "test", "scripts", "bin"];

function walk(dir, out = []) {
  if (!fs.existsSync(dir)) return out;
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    if (e.name === "node_modules" || e.name.startsWith(".")) continue;
    const rel = path.join(dir, e.name);
    if (e.isDirectory()) walk(rel, out);
    else if (/\.(ts|mts|mjs)$/.test(e.name)) out.push(rel);
  }
  return out;
}

const surfaces = [
  ...FOLDERS.map((f) => ({ index: `${f}/index.ts`, scope: `${f}/` })),
  ...fs
    .readdirSync("actors", { withFileTypes: true })
    .filter((e) => e.isDirectory() && fs.existsSync(`actors/${e.name}/index.ts`))
    .map((e) => ({ index: `actors/${e.name}/index.ts`, scope: `actors/${e.name}/` })),
];
const files = SCANNED.flatMap((d) => walk(d)).map((f) => ({ f, text: fs.readFileSync(f, "utf8") }));
const STATEMENT = /(?:import|export)\s+(?:type\s+)?\{([^}]*)\}\s*from\s*["']([^"']+)["']/g;
const names = (list) =>
  list
    .split(",")
    .map((x) => x.trim().replace(/^type\s+/, ""))
    .filter(Boolean)
    .map((x) => x.split(/\s+as\s+/));

const problems = [];
for (const { index, scope } of surfaces) {
  if (!fs.existsSync(index)) continue;
  const src = fs.readFileSync(index, "utf8");
  if (/export\s+\*/.test(src)) problems.push(`${index}: \`export *\` (name each export)`);
  const exported = new Set();
  for (const m of src.matchAll(/export\s+(?:type\s+)?\{([^}]*)\}/g)) for (const [inner, outer] of names(m[1])) exported.add(outer ?? inner);
  const used = new Set();
  for (const { f, text } of files) {
    if (f.startsWith(scope)) continue;
    for (const m of text.matchAll(STATEMENT)) {
      if (!m[2].startsWith(".") || path.normalize(path.join(path.dirname(f), m[2])).replace(/\.js$/, ".ts") !== index) continue;
      for (const [inner] of names(m[1])) used.add(inner);
    }
  }
  for (const name of exported) if (!used.has(name)) problems.push(`${index}: exports ${name}, which nothing outside ${scope} imports`);
}
if (problems.length) {
  console.error(problems.join("\n"));
  process.exit(1);
}
console.log(`✔ ${surfaces.length} public surfaces: named exports only, each used outside its folder or room`);
