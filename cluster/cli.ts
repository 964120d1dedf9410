/**
 * The `runway` command line. `runway node` runs one node of a cluster.
 * (`npm run runway -- <command> …`)
 */
import { parseArgs } from "node:util";
import { pathToFileURL } from "node:url";
import { resolve } from "node:path";
import { createLogger, startNode, type ActorDefinition } from "../runtime/index.js";

const USAGE = `usage:
  runway node --servers <url,…> --name <node> --actors <module> [--user U --pass P] [--lease-ttl-ms N] [--replicas N]
      Runs a node: owns partitions, serves actor mailboxes, hands partitions back on SIGTERM/SIGINT.
      <module> exports \`actors\`: an array of actor definitions.`;

async function loadActors(modulePath: string): Promise<ActorDefinition[]> {
  const mod = (await import(pathToFileURL(resolve(modulePath)).href)) as { actors?: ActorDefinition[] };
  if (!Array.isArray(mod.actors)) throw new Error(`${modulePath} does not export \`actors\``);
  return mod.actors;
}

async function nodeCommand(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      servers: { type: "string", default: "nats://127.0.0.1:4222" },
      name: { type: "string" },
      actors: { type: "string" },
      user: { type: "string" },
      pass: { type: "string" },
      "lease-ttl-ms": { type: "string", default: "10000" },
      replicas: { type: "string", default: "1" },
    },
  });
  if (!values.name || !values.actors) throw new UsageError("node needs --name and --actors");
  const logger = createLogger(`node:${values.name}`);
  const node = await startNode({
    connection: { servers: values.servers!.split(","), ...(values.user ? { user: values.user, pass: values.pass ?? "" } : {}) },
    name: values.name,
    actors: await loadActors(values.actors),
    topology: { replicas: Number(values.replicas) },
    leaseTtlMs: Number(values["lease-ttl-ms"]),
    logger,
  });
  logger.info("node ready", { name: node.name, incarnation: node.incarnation });
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    logger.info("draining");
    await node.stop();
    logger.info("stopped");
    process.exit(0);
  };
  process.on("SIGTERM", () => void stop());
  process.on("SIGINT", () => void stop());
}

class UsageError extends Error {}

const [command, ...rest] = process.argv.slice(2);
try {
  if (command === "node") await nodeCommand(rest);
  else throw new UsageError(command ? `unknown command: ${command}` : "no command");
} catch (err) {
  if (err instanceof UsageError) {
    process.stderr.write(`runway: ${err.message}\n${USAGE}\n`);
    process.exit(2);
  }
  throw err;
}
