import type { Logger } from "./log.js";

/**
 * Ordered start and stop: stages start in the order added and stop in reverse; every stop of a
 * started stage runs, even when an earlier stop throws (Orleans-style lifecycle).
 */
export interface Stage {
  name: string;
  start(): Promise<void> | void;
  stop?(): Promise<void> | void;
}

export class Lifecycle {
  private readonly stages: Stage[] = [];
  private started: Stage[] = [];

  constructor(private readonly logger: Logger) {}

  add(stage: Stage): this {
    this.stages.push(stage);
    return this;
  }

  async start(): Promise<void> {
    for (const stage of this.stages) {
      try {
        await stage.start();
      } catch (err) {
        this.logger.error("stage failed to start", { stage: stage.name, error: String(err) });
        await this.stop();
        throw err;
      }
      this.started.push(stage);
      this.logger.debug("stage started", { stage: stage.name });
    }
  }

  async stop(): Promise<void> {
    const errors: unknown[] = [];
    for (const stage of this.started.reverse()) {
      try {
        await stage.stop?.();
      } catch (err) {
        errors.push(err);
        this.logger.error("stage failed to stop", { stage: stage.name, error: String(err) });
      }
    }
    this.started = [];
    if (errors.length > 0) throw new AggregateError(errors, "some stages failed to stop");
  }
}
