// Public surface of the test harness: real nats-server processes, the real nats CLI, child
// processes and polling. Deliberately free of vitest so that benchmarks can use it too.
export { toolPaths, repoRoot } from "./tools.js";
export type { ToolPaths } from "./tools.js";
export { startServer, freePort, setAccountFileQuota, CLUSTER_NAME, RUNWAY_USER, SYS_USER } from "./nats-server.js";
export type { NatsServerHandle, StartServerOptions, RestartOptions, ConnectOptions, ServerAuth } from "./nats-server.js";
export { startCluster } from "./cluster.js";
export type { ClusterHandle, StartClusterOptions } from "./cluster.js";
export { natsCli } from "./nats-cli.js";
export type { CliTarget, NatsCliOptions, NatsCliResult } from "./nats-cli.js";
export { spawnProcess, spawnTsx, killAll, livePids } from "./processes.js";
export type { ChildHandle, SpawnOptions, ExitInfo, WaitForLineOptions } from "./processes.js";
export { waitFor } from "./wait.js";
export { startTcpProxy } from "./proxy.js";
export type { TcpProxy } from "./proxy.js";
export type { WaitForOptions } from "./wait.js";
