import type { A2aServer, A2aServerDeps, A2aServerOptions } from "./server.js";

/**
 * Starts the A2A HTTP server. Express and the A2A SDK are loaded here, on first use: a node that
 * serves no HTTP never loads them.
 */
export async function startA2a(deps: Omit<A2aServerDeps, "tasks">, options: A2aServerOptions): Promise<A2aServer> {
  const [{ startA2aServer }, { TaskRecords }] = await Promise.all([import("./server.js"), import("./tasks.js")]);
  return startA2aServer({ ...deps, tasks: new TaskRecords(deps.nc) }, options);
}
