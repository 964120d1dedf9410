// Dual-authority writes (issue 41 §1): two owners of one partition committing. Every write of a
// partition's fenced log carries `Rw-Writer: <node>/<epoch>` (runtime/store/partition-log.ts), where
// the epoch is the stream sequence of the `fence` record its writer claimed under; a claim or a
// release writes a new `fence` record. So, in one partition stream, read in sequence order:
// - a write under epoch E stored after another claim point c > E (a `fence` record at c, or any
//   write naming epoch c) was made by an owner that had been superseded: a dual-authority write;
// - two different nodes naming one epoch are two owners under one claim;
// - a write naming an epoch that is not before it, or a `fence` record's owner other than the node
//   writing under it, cannot come from a fenced writer either.
// Most writes do not stay stored: a record's next write rolls its history up, an ended run's
// records are removed. So the soak taps every partition stream while it runs (an ordered consumer
// per stream, headers only, from the first message: it sees each write shortly after it is stored),
// and at the end reads every message still stored with batched direct gets (served by any replica);
// the check runs over both. A write removed before the tap reached it (within milliseconds, or
// while a consumer is recreated after a server kill) is not seen; `tapped` and `writesScanned` say
// how many were.
import type { NatsConnection } from "@nats-io/transport-node";
import { jetstream, jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";

/** One stored message of a partition stream, as the scan needs it. */
export interface PartitionRecord {
  seq: number;
  /** A `fence` record (a claim or a release). */
  fence: boolean;
  /** The owner a `fence` record names (null: a release), when its body was read. */
  fenceOwner?: string | null;
  /** The `Rw-Writer` header, when there is one. */
  writer?: string;
}

export interface StreamScan {
  writes: number;
  violations: string[];
}

export interface DualAuthorityReport {
  streams: number;
  /** Writes (messages carrying `Rw-Writer`) checked: seen by the tap while the soak ran or stored at the end. */
  writesScanned: number;
  /** Messages the tap received while the soak ran. */
  tapped: number;
  /** Messages still stored at the end, read by the final scan. */
  messagesRead: number;
  /** Writes that break the fence (each counted once). */
  violations: number;
  /** The first 20, each in a sentence. */
  first: string[];
  /** Time the scan took. */
  ms: number;
  /** Streams that could not be read to their end (a missed target: not checked). */
  unreadStreams: string[];
}

function parseWriter(header: string): { node: string; epoch: number } | undefined {
  const at = header.lastIndexOf("/");
  if (at <= 0) return undefined;
  const epoch = Number(header.slice(at + 1));
  if (!Number.isInteger(epoch) || epoch <= 0) return undefined;
  return { node: header.slice(0, at), epoch };
}

/** Largest value of a sorted array below `limit`, or undefined. */
function largestBelow(sorted: number[], limit: number): number | undefined {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid]! < limit) lo = mid + 1;
    else hi = mid;
  }
  return lo > 0 ? sorted[lo - 1] : undefined;
}

/** Checks one partition stream's records (in any order; they are sorted by sequence here). */
export function scanStream(stream: string, input: readonly PartitionRecord[]): StreamScan {
  const records = [...input].sort((a, b) => a.seq - b.seq);
  const violations: string[] = [];
  const parsed = new Map<number, { node: string; epoch: number } | undefined>();
  const points = new Set<number>();
  const claimant = new Map<number, string | null>();
  const firstWriter = new Map<number, string>();
  for (const r of records) {
    if (r.fence) {
      points.add(r.seq);
      if (r.fenceOwner !== undefined) claimant.set(r.seq, r.fenceOwner);
    }
    if (r.writer !== undefined) {
      const w = parseWriter(r.writer);
      parsed.set(r.seq, w);
      if (w) {
        points.add(w.epoch);
        if (!firstWriter.has(w.epoch)) firstWriter.set(w.epoch, w.node);
      }
    }
  }
  const sortedPoints = [...points].sort((a, b) => a - b);
  const nodeOfEpoch = new Map<number, { node: string; seq: number }>();
  let writes = 0;
  for (const r of records) {
    if (r.writer === undefined) continue;
    writes++;
    const w = parsed.get(r.seq);
    if (!w) {
      violations.push(`${stream} seq ${r.seq}: Rw-Writer ${JSON.stringify(r.writer)} names no epoch`);
      continue;
    }
    if (w.epoch >= r.seq) {
      violations.push(`${stream} seq ${r.seq}: ${r.writer} names an epoch not before its write`);
      continue;
    }
    const claim = largestBelow(sortedPoints, r.seq)!;
    if (claim > w.epoch) {
      const by = claimant.has(claim) ? claimant.get(claim) : firstWriter.get(claim);
      violations.push(`${stream} seq ${r.seq}: ${r.writer} wrote after the claim at ${claim}${by !== undefined ? ` (${by ?? "a release"})` : ""}`);
      continue;
    }
    const owner = claimant.get(w.epoch);
    if (owner !== undefined && owner !== w.node) {
      violations.push(`${stream} seq ${r.seq}: ${r.writer} wrote under a claim made by ${owner ?? "a release"}`);
      continue;
    }
    const first = nodeOfEpoch.get(w.epoch);
    if (!first) nodeOfEpoch.set(w.epoch, { node: w.node, seq: r.seq });
    else if (first.node !== w.node) violations.push(`${stream} seq ${r.seq}: ${r.writer} under the epoch ${first.node} wrote at ${first.seq}`);
  }
  return { writes, violations };
}

const decoder = new TextDecoder();
/** The `fence` key's subject in a partition stream (runtime/store/partition-log.ts FENCE_KEY). */
const FENCE_SUBJECT = /^\$KV\.rw_p\d+\.fence$/;

async function readStream(jsm: JetStreamManager, stream: string): Promise<{ records: PartitionRecord[]; read: number }> {
  const info = await jsm.streams.info(stream);
  const records: PartitionRecord[] = [];
  let read = 0;
  for (let seq = info.state.first_seq; seq <= info.state.last_seq && info.state.messages > 0;) {
    let got = 0;
    let batch;
    try {
      batch = await jsm.direct.getBatch(stream, { seq, batch: 1_000 });
    } catch (err) {
      // Nothing stored at or after `seq`: the end.
      if (/no message|not found|404/i.test(String((err as Error).message ?? err))) break;
      throw err;
    }
    for await (const m of batch) {
      got++;
      read++;
      seq = m.seq + 1;
      const fence = FENCE_SUBJECT.test(m.subject);
      const writer = m.header?.get("Rw-Writer") || undefined;
      let fenceOwner: string | null | undefined;
      if (fence && m.data.length > 0) {
        try {
          const body: unknown = JSON.parse(decoder.decode(m.data));
          if (body && typeof body === "object" && "owner" in body) fenceOwner = typeof body.owner === "string" ? body.owner : null;
        } catch {
          fenceOwner = undefined;
        }
      }
      if (fence || writer !== undefined) records.push({ ...recordOf(m.seq, m.subject, writer), ...(fenceOwner !== undefined ? { fenceOwner } : {}) });
    }
    if (got === 0) break;
  }
  return { records, read };
}

async function partitionStreams(jsm: JetStreamManager): Promise<string[]> {
  const names: string[] = [];
  for await (const name of jsm.streams.names()) if (/^KV_rw_p\d+$/.test(name)) names.push(name);
  return names.sort((a, b) => Number(a.slice(7)) - Number(b.slice(7)));
}

function recordOf(seq: number, subject: string, writer: string | undefined): PartitionRecord {
  return { seq, fence: FENCE_SUBJECT.test(subject), ...(writer ? { writer } : {}) };
}

/** Receives every partition stream's messages (headers only) as they are stored, until stopped. */
export class WriteTap {
  readonly records = new Map<string, PartitionRecord[]>();
  tapped = 0;
  private readonly stops: (() => Promise<void>)[] = [];
  private readonly loops: Promise<void>[] = [];

  static async start(nc: NatsConnection, log: (line: string) => void = () => undefined): Promise<WriteTap> {
    const tap = new WriteTap();
    const js = jetstream(nc, { timeout: 10_000 });
    const names = await partitionStreams(await jetstreamManager(nc, { timeout: 10_000 }));
    for (const stream of names) {
      const list: PartitionRecord[] = [];
      tap.records.set(stream, list);
      const consumer = await js.consumers.get(stream, { headers_only: true });
      const messages = await consumer.consume();
      tap.stops.push(async () => {
        await messages.close().catch(() => undefined);
      });
      tap.loops.push(
        (async () => {
          try {
            for await (const m of messages) {
              tap.tapped++;
              list.push(recordOf(m.seq, m.subject, m.headers?.get("Rw-Writer") || undefined));
            }
          } catch (err) {
            log(`soak: write tap of ${stream}: ${err instanceof Error ? err.message : String(err)}`);
          }
        })(),
      );
    }
    return tap;
  }

  async stop(): Promise<void> {
    await Promise.all(this.stops.map((s) => s()));
    await Promise.all(this.loops);
  }
}

/**
 * Scans every partition stream (`KV_rw_p<n>`) the connection's account holds, with what a
 * {@link WriteTap} saw of each (a message stored at the end is taken from the final read).
 */
export async function scanDualAuthority(
  nc: NatsConnection,
  options: { tap?: WriteTap; concurrency?: number; tries?: number } = {},
): Promise<DualAuthorityReport> {
  const t0 = Date.now();
  const jsm = await jetstreamManager(nc, { timeout: 10_000 });
  const names = await partitionStreams(jsm);
  const report: DualAuthorityReport = {
    streams: names.length,
    writesScanned: 0,
    tapped: options.tap?.tapped ?? 0,
    messagesRead: 0,
    violations: 0,
    first: [],
    ms: 0,
    unreadStreams: [],
  };
  const all: string[] = [];
  let next = 0;
  const worker = async () => {
    while (next < names.length) {
      const stream = names[next++]!;
      let done = false;
      for (let tries = 0; tries < (options.tries ?? 3) && !done; tries++) {
        try {
          const { records, read } = await readStream(jsm, stream);
          const bySeq = new Map<number, PartitionRecord>();
          for (const r of options.tap?.records.get(stream) ?? []) bySeq.set(r.seq, r);
          for (const r of records) bySeq.set(r.seq, r);
          const scan = scanStream(stream, [...bySeq.values()]);
          report.messagesRead += read;
          report.writesScanned += scan.writes;
          all.push(...scan.violations);
          done = true;
        } catch {
          // read again from the start (a leader election may be under way)
        }
      }
      if (!done) report.unreadStreams.push(stream);
    }
  };
  await Promise.all(Array.from({ length: options.concurrency ?? 4 }, worker));
  report.violations = all.length;
  report.first = all.slice(0, 20);
  report.ms = Date.now() - t0;
  return report;
}
