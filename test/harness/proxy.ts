// A TCP proxy on loopback that can cut the traffic through it: the soak's network partition of a
// node (docs/soak.md). Plain `net` piping; `block()` stops forwarding in both directions (each
// socket is unpiped and paused, so the kernel buffers fill and the peers see silence, as with a
// link that drops every packet) and holds new connections unanswered; `unblock()` pipes again,
// and what was held is delivered, as TCP retransmission delivers it after a short partition.
import { createConnection, createServer, type Server, type Socket } from "node:net";

export interface TcpProxy {
  readonly port: number;
  readonly url: string;
  /** Connections open through the proxy now. */
  readonly connections: number;
  readonly blocked: boolean;
  block(): void;
  unblock(): void;
  close(): Promise<void>;
}

interface Pair {
  client: Socket;
  upstream: Socket;
  piped: boolean;
}

function pipe(p: Pair): void {
  if (p.piped || p.client.destroyed || p.upstream.destroyed) return;
  p.piped = true;
  p.client.pipe(p.upstream);
  p.upstream.pipe(p.client);
}

function unpipe(p: Pair): void {
  if (!p.piped) return;
  p.piped = false;
  p.client.unpipe(p.upstream);
  p.upstream.unpipe(p.client);
  p.client.pause();
  p.upstream.pause();
}

/** Listens on 127.0.0.1 (a free port, or `listenPort`) and forwards each connection to `target`. */
export async function startTcpProxy(target: { host?: string; port: number }, listenPort = 0): Promise<TcpProxy> {
  const pairs = new Set<Pair>();
  let blocked = false;
  const server: Server = createServer({ pauseOnConnect: true }, (client) => {
    client.setNoDelay(true);
    const upstream = createConnection({ host: target.host ?? "127.0.0.1", port: target.port });
    upstream.setNoDelay(true);
    upstream.pause();
    const pair: Pair = { client, upstream, piped: false };
    pairs.add(pair);
    const end = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on("error", end).on("close", end);
    upstream.on("error", end).on("close", end);
    if (!blocked) pipe(pair);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(listenPort, "127.0.0.1", () => resolve());
  });
  const address = server.address();
  if (!address || typeof address === "string") throw new Error("proxy: no port");
  return {
    port: address.port,
    url: `nats://127.0.0.1:${address.port}`,
    get connections() {
      return pairs.size;
    },
    get blocked() {
      return blocked;
    },
    block() {
      blocked = true;
      for (const p of pairs) unpipe(p);
    },
    unblock() {
      blocked = false;
      for (const p of pairs) pipe(p);
    },
    async close() {
      for (const p of pairs) {
        p.client.destroy();
        p.upstream.destroy();
      }
      pairs.clear();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
