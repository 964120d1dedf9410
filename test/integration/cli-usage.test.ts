// The `runway` command as a new user meets it: every command's --help with no server, and every
// failure (no server, refused credentials, no node, a wrong command line, a file that is not
// JSON) one line on stderr with its exit code, never a stack. The usage has one source
// (cluster/cli-help.ts), which docs/cli.md shows word for word.
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { COMMANDS, commandUsage, overview } from "../../cluster/cli-help.js";
import { EXIT, SUCCESS } from "../../cluster/cli-errors.js";
import { freePort, repoRoot, RUNWAY_USER, startServer, type NatsServerHandle } from "../harness/index.js";

const BIN = fileURLToPath(new URL("../../bin/runway.mjs", import.meta.url));
const DOC = readFileSync(join(repoRoot, "docs", "cli.md"), "utf8");
const dir = mkdtempSync(join(tmpdir(), "runway-cli-usage-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

type Ran = { code: number; stdout: string; stderr: string };

/** `runway …` as its own process, with no RUNWAY_* setting of ours (nor an npm's) leaking in. */
function runway(args: string[], env: Record<string, string> = {}): Promise<Ran> {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("RUNWAY_") && k !== "npm_lifecycle_event")) as Record<
    string,
    string
  >;
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [BIN, ...args],
      { cwd: repoRoot, env: { ...clean, npm_config_update_notifier: "false", ...env }, timeout: 60_000 },
      (err, stdout, stderr) => resolve({ code: err ? Number((err as { code?: unknown }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/** Exactly one line on stderr, with no stack frame in it; the line. */
function oneLine(ran: Ran): string {
  const lines = ran.stderr.split("\n").filter((l) => l !== "");
  expect(lines, ran.stderr).toHaveLength(1);
  expect(ran.stderr).not.toMatch(/^\s+at /m);
  expect(lines[0]).toMatch(/^runway: /);
  return lines[0]!;
}

describe("with no server", () => {
  it.each(COMMANDS.map((c) => c.name))(
    "runway %s --help prints that command's usage (its forms, options, an example, the exit codes) and exits 0",
    async (name) => {
      const ran = await runway([name, "--help"], { RUNWAY_SERVERS: `nats://127.0.0.1:${await freePort()}` });
      expect(ran.code, ran.stderr).toBe(0);
      expect(ran.stderr).toBe("");
      expect(ran.stdout).toBe(`${commandUsage(name)}\n`);
      expect(ran.stdout).toMatch(new RegExp(`^usage: runway ${name}`));
      expect(ran.stdout).toMatch(/\nexample:\n {2}runway /);
      expect(ran.stdout).toMatch(/exit codes: 0 success/);
    },
  );

  it("runway help <command>, runway <command> <sub> -h and runway --help print the same usage; an unknown command is a usage error", async () => {
    const [help, short, all, unknown] = await Promise.all([runway(["help", "run"]), runway(["run", "start", "-h"]), runway(["--help"]), runway(["runn"])]);
    expect(help).toMatchObject({ code: 0, stdout: `${commandUsage("run")}\n` });
    expect(short).toMatchObject({ code: 0, stdout: `${commandUsage("run")}\n` });
    expect(all).toMatchObject({ code: 0, stdout: `${overview()}\n` });
    expect(unknown.code).toBe(EXIT.usage);
    expect(oneLine(unknown)).toBe("runway: unknown command: runn (usage: runway --help)");
  });

  it("a command against a server nobody listens on: one line (which URL, what to do), no stack, exit 3", async () => {
    const url = `nats://127.0.0.1:${await freePort()}`;
    const ran = await runway(["tools", "ls", "--servers", url]);
    expect(ran.code, ran.stderr).toBe(EXIT.unreachable);
    expect(ran.stdout).toBe("");
    expect(oneLine(ran)).toBe(
      `runway: cannot reach NATS at ${url} (connection refused): start one with \`runway dev\`, or point --servers (env RUNWAY_SERVERS) at yours`,
    );
    // For developers: the stack after the same line.
    const debug = await runway(["tools", "ls", "--servers", url], { RUNWAY_DEBUG: "1" });
    expect(debug.code).toBe(EXIT.unreachable);
    expect(debug.stderr.split("\n")[0]).toBe(ran.stderr.trimEnd());
    expect(debug.stderr).toMatch(/^\s+at /m);
  });

  it("def put of a file that is not JSON, or that is not there: one line naming the file, exit 2, before anything is connected", async () => {
    const file = join(dir, "flow.json");
    writeFileSync(file, "name: not json\n");
    const url = `nats://127.0.0.1:${await freePort()}`;
    const [bad, missing] = await Promise.all([
      runway(["def", "put", file, "--servers", url]),
      runway(["def", "put", join(dir, "nope.json"), "--servers", url]),
    ]);
    expect(bad.code, bad.stderr).toBe(EXIT.usage);
    expect(oneLine(bad)).toMatch(new RegExp(`^runway: ${file.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")} is not JSON \\(.+\\) \\(usage: runway def --help\\)$`));
    expect(missing.code, missing.stderr).toBe(EXIT.usage);
    expect(oneLine(missing)).toMatch(/cannot read .*nope\.json: no such file \(usage: runway def --help\)$/);
  });

  it("a bad flag, a missing argument, a flag that is not JSON, a payload approve cannot carry: one line with a usage hint, exit 2", async () => {
    const cases: [string[], RegExp][] = [
      [["run", "list", "--wat"], /^runway: Unknown option '--wat' \(usage: runway run --help\)$/],
      [["run", "get"], /^runway: run get <id>: which run\? \(missing <id>\) \(usage: runway run --help\)$/],
      [["run", "start", "flow", "--input", "{x"], /^runway: --input "\{x" is not JSON \(.+\) \(usage: runway run --help\)$/],
      [["approvals", "approve", "t1_ab:gate", "--payload", "{}"], /only a request for input is approved with content; edit changes another item's payload/],
      [["approvals", "edit", "t1_ab:gate"], /^runway: approvals edit <id> --payload JSON/],
    ];
    const runs = await Promise.all(cases.map(([args]) => runway(args)));
    runs.forEach((ran, i) => {
      expect(ran.code, ran.stderr).toBe(EXIT.usage);
      expect(oneLine(ran)).toMatch(cases[i]![1]);
    });
  });
});

describe("with a NATS server and no node", () => {
  let server: NatsServerHandle;
  beforeAll(async () => {
    server = await startServer();
  });
  afterAll(async () => {
    await server?.dispose();
  });

  it("refused credentials and a server with no node: one line each, exit 3", async () => {
    const [refused, noNode] = await Promise.all([
      runway(["run", "get", "demo_x", "--servers", server.url, "--user", RUNWAY_USER.user, "--pass", "wrong"]),
      runway(["run", "get", "demo_x", "--servers", server.url, "--user", RUNWAY_USER.user, "--pass", RUNWAY_USER.pass]),
    ]);
    expect(refused.code, refused.stderr).toBe(EXIT.unreachable);
    expect(oneLine(refused)).toBe(`runway: NATS at ${server.url} refused the credentials of user "${RUNWAY_USER.user}": check --user and --pass`);
    expect(noNode.code, noNode.stderr).toBe(EXIT.unreachable);
    expect(oneLine(noNode)).toBe(`runway: no Runway node serves runway.v1.demo.runs.get at ${server.url}: start one with \`runway dev\` or \`runway node\``);
  });
});

describe("docs/cli.md", () => {
  it("shows every command's --help word for word", () => {
    for (const c of COMMANDS)
      expect(DOC, `docs/cli.md: the block of runway ${c.name} --help`).toContain(`\`\`\`text\n$ runway ${c.name} --help\n${commandUsage(c.name)}\n\`\`\``);
  });

  it("lists the success outcomes of every command as the CLI counts them, and the four exit codes", () => {
    const rows = [...DOC.matchAll(/^\| `([a-z -]+)` \| (`[a-z_]+`(?:, `[a-z_]+`)*) \|$/gm)].map((m) => [m[1], m[2]!.split(", ").map((o) => o.slice(1, -1))]);
    expect(Object.fromEntries(rows)).toEqual(SUCCESS);
    for (const code of Object.values(EXIT)) expect(DOC).toMatch(new RegExp(`^\\| ${code} \\| `, "m"));
  });
});
