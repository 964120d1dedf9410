import type { A2aServer, A2aServerDeps, A2aServerOptions } from "./server.js";
import type { PushDeliveryDeps } from "./push.js";

/** How a node delivers push notifications (push.ts `PushDeliveryDeps`): its name, and the timings tests shorten. */
export type PushOptions = Partial<
  Pick<PushDeliveryDeps, "node" | "leaseMs" | "pollMs" | "scanMs" | "retryBaseMs" | "retryMaxMs" | "maxAttempts" | "timeoutMs">
>;

/**
 * Starts the A2A HTTP server, and the delivery of the tasks' push notifications beside it (stopped
 * with it). Express and the A2A SDK are loaded here, on first use: a node that serves no HTTP
 * never loads them.
 */
export async function startA2a(deps: Omit<A2aServerDeps, "tasks" | "push">, options: A2aServerOptions & { push?: PushOptions }): Promise<A2aServer> {
  const [{ startA2aServer }, { TaskRecords }, { PushConfigs }, { PushDeliverer, anonymousNode }] = await Promise.all([
    import("./server.js"),
    import("./tasks.js"),
    import("./push-configs.js"),
    import("./push.js"),
  ]);
  const tasks = new TaskRecords(deps.nc);
  const push = new PushConfigs(deps.nc);
  const deliverer = new PushDeliverer({
    ...options.push,
    node: options.push?.node ?? anonymousNode(),
    nc: deps.nc,
    runs: deps.runs,
    tasks,
    configs: push,
    logger: deps.logger,
    now: deps.now,
  });
  const server = await startA2aServer({ ...deps, tasks, push, pushed: () => deliverer.kick() }, options);
  deliverer.start();
  return {
    url: server.url,
    close: async () => {
      try {
        await deliverer.stop();
      } finally {
        await server.close();
      }
    },
  };
}
