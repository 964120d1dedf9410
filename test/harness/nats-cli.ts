// Runs the real `nats` CLI against a harness server or cluster, isolated from any user context.
import { execFile } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { RUNWAY_USER, SYS_USER } from "./nats-server.js";
import { registerProcess, registerTempDir } from "./processes.js";
import { toolPaths } from "./tools.js";

export type CliTarget = { url: string } | { urls: readonly string[] } | string;

export interface NatsCliOptions {
  /** Authenticate as the system-account user (for `server report ...`, `server ls`). */
  sys?: boolean;
  /** Kill the CLI and reject after this long (default 30 s). */
  timeoutMs?: number;
  /** Also return stdout as a Buffer (binary payloads, e.g. `kv get --raw`). */
  raw?: boolean;
  /** Authenticate with these flags instead (e.g. `["--nkey", file]`). */
  auth?: readonly string[];
  /** Extra environment (NATS_* variables from the parent are dropped first). */
  env?: Record<string, string>;
}

export interface NatsCliResult {
  stdout: string;
  stderr: string;
  /** Exit code; the CLI is not expected to be killed by signals other than our timeout. */
  code: number;
  /** stdout bytes, only when `raw` was requested. */
  raw?: Buffer;
}

let home: string | undefined;
const noContextSupport = new Map<string, Promise<boolean>>();

/** Older natscli releases lack --no-context; the isolated HOME already keeps contexts out. */
function supportsNoContext(bin: string): Promise<boolean> {
  let p = noContextSupport.get(bin);
  if (!p) {
    p = new Promise<boolean>((resolve) => {
      execFile(bin, ["--help"], { timeout: 10_000 }, (_err, stdout, stderr) => resolve(`${stdout}${stderr}`.includes("--no-context")));
    });
    noContextSupport.set(bin, p);
  }
  return p;
}

/** One empty HOME/XDG_CONFIG_HOME per test process so that no ~/.config/nats context leaks in. */
function isolatedHome(): string {
  if (!home) {
    home = mkdtempSync(join(tmpdir(), "runway-nats-cli-"));
    registerTempDir(home);
  }
  return home;
}

function serverArg(target: CliTarget): string {
  if (typeof target === "string") return target;
  if ("urls" in target) return target.urls.join(",");
  return target.url;
}

/** Run `nats <args>` against target. Resolves with the exit code rather than throwing on
 *  failure; rejects only on timeout (or when the binary cannot be started). */
export async function natsCli(target: CliTarget, args: string[], opts: NatsCliOptions = {}): Promise<NatsCliResult> {
  const { natsCli: bin } = await toolPaths();
  const cred = opts.sys ? SYS_USER : RUNWAY_USER;
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const h = isolatedHome();
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith("NATS_")) env[k] = v;
  Object.assign(env, { HOME: h, XDG_CONFIG_HOME: join(h, ".config"), XDG_DATA_HOME: join(h, ".local", "share"), NO_COLOR: "1" }, opts.env);
  const fullArgs = [
    ...((await supportsNoContext(bin)) ? ["--no-context"] : []),
    "--server",
    serverArg(target),
    ...(opts.auth ?? ["--user", cred.user, "--password", cred.pass]),
    ...args,
  ];

  return new Promise<NatsCliResult>((resolve, reject) => {
    let timedOut = false;
    const child = execFile(bin, fullArgs, { env, encoding: "buffer", maxBuffer: 256 * 1024 * 1024 }, (err, stdout, stderr) => {
      clearTimeout(timer);
      if (timedOut) {
        reject(
          new Error(
            `nats ${args.join(" ")} timed out after ${timeoutMs} ms\nstdout: ${stdout.toString("utf8").slice(-2000)}\nstderr: ${stderr.toString("utf8").slice(-2000)}`,
          ),
        );
        return;
      }
      // execFile reports a non-zero exit as err with a numeric code; a string code means the
      // binary could not run at all
      if (err && typeof (err as NodeJS.ErrnoException).code === "string") {
        reject(new Error(`could not run ${bin}: ${err.message}`));
        return;
      }
      const code = err ? (typeof (err as { code?: unknown }).code === "number" ? (err as { code: number }).code : 1) : 0;
      const result: NatsCliResult = { stdout: stdout.toString("utf8"), stderr: stderr.toString("utf8"), code };
      if (opts.raw) result.raw = stdout;
      resolve(result);
    });
    if (child.pid !== undefined) registerProcess(child.pid, `nats ${args[0] ?? ""}`, new Promise((r) => child.once("exit", r)));
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
    }, timeoutMs);
  });
}
