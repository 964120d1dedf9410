#!/usr/bin/env node
// The `runway` command (`npx runway …`, `./bin/runway.mjs …`, `npm run runway -- …`).
//
// It runs cluster/cli.ts in this very process, so a signal sent to `runway` (SIGTERM, SIGINT)
// reaches the node itself and drains it. The sources are bundled into one ES module
// (scripts/bundle.mjs) and that is imported: loading ~150 TypeScript modules one at a time
// through tsx's loader thread took ~0.4 s more of every start, a node's restart included. The
// bundle is named by the sources it was made of, so it always runs the sources as they are now,
// never a `dist/` that may be older. Should the bundle not build, tsx runs the sources directly.
import { runBundled, SOURCE_DIRS } from "../scripts/bundle.mjs";

await runBundled("runway", "cli", "cluster/cli.ts", SOURCE_DIRS);
