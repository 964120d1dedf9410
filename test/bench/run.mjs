// `npm run bench -- <name>`: test/bench/main.ts as `runway node` runs the sources, from one bundle
// (scripts/bundle.mjs: esbuild, no kept names), so a benchmark measures the code a node runs.
// Through tsx, module by module, the same w1 was 4–7 % slower (alternated runs, 2026-12-05): tsx
// keeps every function's name, a call for each closure made, and leaves each module its own.
// `node --import tsx test/bench/main.ts <name>` still runs the sources directly.
import { runBundled, SOURCE_DIRS } from "../../scripts/bundle.mjs";

// `ab` loads both checkouts' sources at run time, through tsx (`abfresh` runs each side in a process
// of its own, through tsx too); the others run as a node does, without tsx's ~30 MB of heap.
await runBundled("bench", "bench", "test/bench/main.ts", [...SOURCE_DIRS, "test"], {
  withTsx: process.argv[2] === "ab",
});
