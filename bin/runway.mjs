#!/usr/bin/env node
// The `runway` command (`npx runway …`, `./bin/runway.mjs …`, `npm run runway -- …`).
//
// It runs cluster/cli.ts in this very process: tsx's ESM hooks are registered here, then the
// CLI is imported. No child process stands between the caller and the node, so a signal sent
// to `runway` (SIGTERM, SIGINT) reaches the node itself and drains it. tsx is a runtime
// dependency, so this works from a fresh clone after `npm ci`; it always runs the sources,
// never a `dist/` that may be older than them.
import { register } from "tsx/esm/api";

register();
await import("../cluster/cli.ts");
