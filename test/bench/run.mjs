// `npm run bench -- <name>`: test/bench/main.ts as `runway node` runs the sources, from one bundle
// (scripts/bundle.mjs: esbuild, no kept names), so a benchmark measures the code a node runs.
// Through tsx, module by module, it is slower: tsx keeps every function's name, a call for each
// closure made, and leaves each module its own.
// `node --import tsx test/bench/main.ts <name>` still runs the sources directly.
import { runBundled, SOURCE_DIRS } from "../../scripts/bundle.mjs";

// `ab` loads both checkouts' sources at run time, through tsx (`abfresh` runs each side in a process
// of its own, through tsx too); the others run as a node does, without tsx's heap.
await runBundled("bench", "bench", "test/bench/main.ts", [...SOURCE_DIRS, "test"], {
  withTsx: process.argv[2] === "ab",
});
