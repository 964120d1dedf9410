// cluster/ is the top of the layering: its entry points are the CLI (cli.ts, run by bin/runway.mjs)
// and the node (runway-node.ts); no other folder imports it, so its surface names nothing.
export {};
