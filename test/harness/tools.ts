// Where nats-server and the nats CLI are: recorded by scripts/setup.mjs in .tools/tools.json.
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

export const repoRoot = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const toolsJson = join(repoRoot, ".tools", "tools.json");

export interface ToolPaths {
  natsServer: string;
  natsCli: string;
}

let cached: Promise<ToolPaths> | undefined;

function readRecorded(): ToolPaths | undefined {
  try {
    const data = JSON.parse(readFileSync(toolsJson, "utf8")) as { natsServer?: { path?: unknown }; natsCli?: { path?: unknown } };
    const natsServer = data.natsServer?.path;
    const natsCli = data.natsCli?.path;
    if (typeof natsServer !== "string" || typeof natsCli !== "string") return undefined;
    if (!existsSync(natsServer) || !existsSync(natsCli)) return undefined;
    return { natsServer, natsCli };
  } catch {
    return undefined;
  }
}

/** Paths of the nats-server and nats binaries; runs scripts/setup.mjs when they are not
 *  recorded yet (e.g. `vitest` run directly on a fresh checkout). */
export function toolPaths(): Promise<ToolPaths> {
  cached ??= (async () => {
    const recorded = readRecorded();
    if (recorded) return recorded;
    const setup = (await import(pathToFileURL(join(repoRoot, "scripts", "setup.mjs")).href)) as { ensureTools: () => Promise<unknown> };
    await setup.ensureTools();
    const after = readRecorded();
    if (!after) throw new Error(`scripts/setup.mjs ran but ${toolsJson} still names no usable binaries`);
    return after;
  })();
  // a failed attempt must not be cached forever
  cached.catch(() => (cached = undefined));
  return cached;
}
