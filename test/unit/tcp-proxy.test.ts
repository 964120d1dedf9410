import { createConnection, createServer, type Socket } from "node:net";
import { afterEach, expect, it } from "vitest";
import { startTcpProxy, waitFor, type TcpProxy } from "../harness/index.js";

// The soak's network partition (docs/soak.md) cuts a node's traffic with this proxy: blocked, it
// forwards nothing either way and holds new connections; unblocked, what was held goes through.
const open: { close(): unknown }[] = [];
afterEach(async () => {
  for (const o of open.splice(0)) await o.close();
});

async function echoServer(): Promise<number> {
  const sockets = new Set<Socket>();
  const server = createServer((s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
    s.pipe(s);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  open.push({ close: () => new Promise<void>((r) => (sockets.forEach((s) => s.destroy()), server.close(() => r()))) });
  return (server.address() as { port: number }).port;
}

function client(proxy: TcpProxy): { socket: Socket; received: () => string } {
  let got = "";
  const socket = createConnection({ host: "127.0.0.1", port: proxy.port });
  socket.on("data", (d) => (got += d.toString())).on("error", () => undefined);
  open.push({ close: () => socket.destroy() });
  return { socket, received: () => got };
}

it("forwards both ways; blocked, it forwards nothing and holds new connections; unblocked, the held bytes arrive", async () => {
  const proxy = await startTcpProxy({ port: await echoServer() });
  open.push(proxy);
  const a = client(proxy);
  a.socket.write("one ");
  await waitFor(() => a.received() === "one ", { timeoutMs: 5_000, describe: "the echo through the proxy" });

  proxy.block();
  a.socket.write("two ");
  const b = client(proxy);
  b.socket.write("held ");
  // Nothing may come back while blocked: a bounded look (an absence cannot be waited on).
  await new Promise((r) => setTimeout(r, 300));
  expect(a.received()).toBe("one ");
  expect(b.received()).toBe("");

  proxy.unblock();
  await waitFor(() => a.received() === "one two " && b.received() === "held ", { timeoutMs: 5_000, describe: "the held bytes after unblock" });
  expect(proxy.connections).toBe(2);
  a.socket.destroy();
  await waitFor(() => proxy.connections === 1, { timeoutMs: 5_000, describe: "the closed connection to be dropped" });
});

it("closes the client's side when the target is gone", async () => {
  const proxy = await startTcpProxy({ port: 1 });
  open.push(proxy);
  const a = client(proxy);
  await waitFor(() => a.socket.destroyed || a.socket.closed, { timeoutMs: 5_000, describe: "the client socket to close" });
});
