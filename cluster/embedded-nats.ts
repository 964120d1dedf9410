import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { connect, nkeyAuthenticator } from "@nats-io/transport-node";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

/** The nats-server that `npm run setup` recorded (never Debian's 2.9.10). */
export function natsServerBinary(): string {
  const tools = join(root, ".tools", "tools.json");
  if (existsSync(tools)) {
    const recorded = (JSON.parse(readFileSync(tools, "utf8")) as { natsServer?: { path?: string } }).natsServer?.path;
    if (recorded && existsSync(recorded)) return recorded;
  }
  throw new Error("nats-server not set up: run `npm run setup` first");
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

export interface EmbeddedNats {
  url: string;
  process: ChildProcess;
  storeDir: string;
  stop(): Promise<void>;
}

/**
 * A JetStream-enabled nats-server as a child process on a free loopback port, for `runway dev`
 * and the demo: a newcomer needs nothing else running. `auth`: a config line that turns
 * credentials on (`include "…"` of a `runway creds` auth config), and a seed allowed in, to
 * see that the server is up.
 */
export async function startEmbeddedNats(storeDir: string, auth?: { include: string; seed: string }): Promise<EmbeddedNats> {
  mkdirSync(storeDir, { recursive: true });
  const port = await freePort();
  const config = join(storeDir, "nats.conf");
  writeFileSync(
    config,
    `listen: 127.0.0.1:${port}\nserver_name: runway-dev\njetstream { store_dir: "${join(storeDir, "js")}" }\n${auth ? `${auth.include}\n` : ""}`,
  );
  const authenticator = auth ? { authenticator: nkeyAuthenticator(new TextEncoder().encode(auth.seed)) } : {};
  const child = spawn(natsServerBinary(), ["-c", config], { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr?.on("data", (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4_000)));
  const url = `nats://127.0.0.1:${port}`;
  const deadline = Date.now() + 15_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`nats-server exited: ${stderr}`);
    try {
      const nc = await connect({ servers: url, reconnect: false, timeout: 1_000, ...authenticator });
      await nc.close();
      break;
    } catch (err) {
      if (Date.now() > deadline) throw new Error(`nats-server did not start: ${String(err)} ${stderr}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  return {
    url,
    process: child,
    storeDir,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.kill("SIGTERM");
      }),
  };
}
