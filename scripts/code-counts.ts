// The structure counts issue 37 reports before → after: README lines, exported names per folder,
// casts of an answer's value, long functions, long files, and the production machines' edges.
// Run from the repository root: `node --import tsx scripts/code-counts.ts` (one JSON object).
import { readFileSync, readdirSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import ts from "typescript";
import { PRODUCTION_MACHINES } from "../machines/diagram.js";

const ROOT = process.cwd();
const FOLDERS = ["machines", "runtime", "actors", "gateways", "cluster"];

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) return sources(p);
    return p.endsWith(".ts") && !p.endsWith(".d.ts") ? [p] : [];
  });
}

function exportedNames(indexFile: string): number {
  const sf = ts.createSourceFile(indexFile, readFileSync(indexFile, "utf8"), ts.ScriptTarget.Latest, true);
  let n = 0;
  sf.forEachChild((node) => {
    if (ts.isExportDeclaration(node)) n += node.exportClause && ts.isNamedExports(node.exportClause) ? node.exportClause.elements.length : 1;
    else if (ts.canHaveModifiers(node) && ts.getModifiers(node)?.some((m) => m.kind === ts.SyntaxKind.ExportKeyword)) n += 1;
  });
  return n;
}

const files = FOLDERS.flatMap((f) => sources(join(ROOT, f)));
const longFunctions: string[] = [];
let casts = 0;
const castSites: string[] = [];
for (const file of files) {
  const text = readFileSync(file, "utf8");
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const visit = (node: ts.Node) => {
    if (ts.isFunctionLike(node) && "body" in node && node.body) {
      const start = sf.getLineAndCharacterOfPosition(node.getStart()).line;
      const end = sf.getLineAndCharacterOfPosition(node.getEnd()).line;
      if (end - start + 1 > 60) {
        const name = node.name && ts.isIdentifier(node.name) ? node.name.text : "(anonymous)";
        longFunctions.push(`${relative(ROOT, file)}:${start + 1} ${name} ${end - start + 1}`);
      }
    }
    if (ts.isAsExpression(node) && /\.value$/.test(node.expression.getText(sf))) {
      casts += 1;
      castSites.push(`${relative(ROOT, file)}:${sf.getLineAndCharacterOfPosition(node.getStart()).line + 1}`);
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
}

interface NodeLike {
  states: Record<string, NodeLike>;
  transitions: Map<string, { target?: NodeLike[] }[]>;
  always?: { target?: NodeLike[] }[];
}
const machines = Object.fromEntries(
  PRODUCTION_MACHINES.map(({ name, machine }) => {
    let edges = 0;
    let selfLoops = 0;
    const walk = (node: NodeLike) => {
      for (const child of Object.values(node.states)) {
        const ts_ = [...child.transitions.values()].flat().concat(child.always ?? []);
        for (const t of ts_) {
          const targets = t.target && t.target.length > 0 ? t.target : [child];
          for (const target of targets) {
            edges += 1;
            if (target === child) selfLoops += 1;
          }
        }
        walk(child);
      }
    };
    walk((machine as unknown as { root: NodeLike }).root);
    return [name, { edges, selfLoops }];
  }),
);

const lines = (p: string) => readFileSync(join(ROOT, p), "utf8").split("\n").length - 1;
console.log(
  JSON.stringify(
    {
      readme_lines: lines("README.md"),
      exported_names: Object.fromEntries(FOLDERS.map((f) => [f, exportedNames(join(ROOT, f, "index.ts"))])),
      answer_value_casts: casts,
      cast_sites: castSites,
      functions_over_60_lines: longFunctions.length,
      long_functions: longFunctions,
      files_over_400_lines: files.filter((f) => lines(relative(ROOT, f)) > 400).map((f) => `${relative(ROOT, f)} ${lines(relative(ROOT, f))}`),
      machines,
    },
    null,
    1,
  ),
);
