/**
 * Counters a node keeps about its own work, read by `runway.v1.ops.metrics` (JSON) and the
 * Prometheus text endpoint. Counters that other components already keep (host, executor,
 * pool) are read from them when a snapshot is taken, not copied, so nothing drifts.
 */
export type Labels = Record<string, string>;

export interface MetricSource {
  /** name → value (counters and gauges), with optional labels. */
  collect(): { name: string; help: string; type: "counter" | "gauge"; value: number; labels?: Labels }[];
}

export class NodeMetrics {
  private readonly counters = new Map<string, { name: string; help: string; labels: Labels; value: number }>();
  private readonly sources: MetricSource[] = [];

  constructor(readonly node: string) {}

  inc(name: string, help: string, labels: Labels = {}, by = 1): void {
    const key = `${name}${JSON.stringify(labels)}`;
    const c = this.counters.get(key) ?? { name, help, labels, value: 0 };
    c.value += by;
    this.counters.set(key, c);
  }

  addSource(source: MetricSource): void {
    this.sources.push(source);
  }

  snapshot(): { name: string; help: string; type: "counter" | "gauge"; value: number; labels: Labels }[] {
    const out: { name: string; help: string; type: "counter" | "gauge"; value: number; labels: Labels }[] = [...this.counters.values()].map((c) => ({
      name: c.name,
      help: c.help,
      type: "counter" as const,
      value: c.value,
      labels: c.labels,
    }));
    for (const s of this.sources) for (const m of s.collect()) out.push({ ...m, labels: m.labels ?? {} });
    return out.sort((a, b) => a.name.localeCompare(b.name));
  }

  json(): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const m of this.snapshot()) {
      const labels = Object.entries(m.labels);
      if (labels.length === 0) out[m.name] = m.value;
      else {
        const group = (out[m.name] ??= {}) as Record<string, number>;
        group[labels.map(([k, v]) => `${k}=${v}`).join(",")] = m.value;
      }
    }
    return { node: this.node, metrics: out };
  }

  /** Prometheus text exposition format (version 0.0.4). */
  prometheus(): string {
    const lines: string[] = [];
    const seen = new Set<string>();
    for (const m of this.snapshot()) {
      const name = `runway_${m.name}`;
      if (!seen.has(name)) {
        lines.push(`# HELP ${name} ${m.help}`, `# TYPE ${name} ${m.type}`);
        seen.add(name);
      }
      const labels = Object.entries({ node: this.node, ...m.labels })
        .map(([k, v]) => `${k}="${v.replace(/["\\\n]/g, "_")}"`)
        .join(",");
      lines.push(`${name}{${labels}} ${m.value}`);
    }
    return `${lines.join("\n")}\n`;
  }
}
