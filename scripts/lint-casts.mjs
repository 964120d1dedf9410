// Fails when a TypeScript source casts an answer's value (`answer.value as T`, `<T>answer.value`)
// outside a decoder. An answer's value gets its type from the actor's declared protocol
// (runtime/actor/protocol.ts: `answerOf`, typed handles), once, so a caller branches on a closed
// union instead of asserting a shape the compiler cannot check.
//
//   node scripts/lint-casts.mjs [folder…]      (default: the production folders)
import { readdirSync, readFileSync, statSync } from "node:fs";
import { basename, join, relative } from "node:path";

const ROOTS = process.argv.length > 2 ? process.argv.slice(2) : ["machines", "runtime", "actors", "gateways", "cluster"];
/** Files that decode (bytes or a protocol's values): the one place a cast may give a value its type. */
const DECODER = /(^|[-.])(codec|decoder|decode|wire|protocol)\.ts$/;
const CASTS = [/\.value\s+as\s/g, /<[A-Za-z_][^<>;()]*>\s*[A-Za-z_$][\w$]*\.value\b/g];

function* sources(dir) {
  for (const name of readdirSync(dir)) {
    if (name === "node_modules" || name.startsWith(".")) continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) yield* sources(path);
    else if (name.endsWith(".ts") && !name.endsWith(".d.ts")) yield path;
  }
}

const found = [];
for (const root of ROOTS) {
  for (const file of sources(root)) {
    if (DECODER.test(basename(file))) continue;
    const text = readFileSync(file, "utf8");
    for (const pattern of CASTS) {
      for (const m of text.matchAll(pattern)) {
        const line = text.slice(0, m.index).split("\n").length;
        found.push(`${relative(process.cwd(), file)}:${line}: ${text.split("\n")[line - 1].trim()}`);
      }
    }
  }
}

if (found.length > 0) {
  console.error(`An answer's value is cast outside a decoder (type it by the actor's protocol instead: answerOf, typed handles):`);
  for (const f of found) console.error(`  ${f}`);
  process.exit(1);
}
