import { defineConfig } from "vitest/config";

// Integration and chaos tests start real nats-server processes; on a 2-core machine they run
// one file at a time so that no test's deadline is eaten by another file's servers.
export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    pool: "forks",
    fileParallelism: false,
    testTimeout: 120_000,
    hookTimeout: 60_000,
    reporters: ["default"],
  },
});
