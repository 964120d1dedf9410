/**
 * Live tokens, coalesced: a model streams text in small pieces, and each piece published alone
 * would be one NATS message per token for every follower. Pieces of one turn are joined and sent
 * when `maxChars` have gathered or `maxMs` have passed since the first unsent one, and at the
 * turn's end (`flush`), so a follower sees the text about every 50 ms or 200 characters, in order.
 */
export class TextDeltaCoalescer {
  private text = "";
  private turn = -1;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly send: (turn: number, text: string) => void,
    private readonly maxChars = 200,
    private readonly maxMs = 50,
  ) {}

  push(turn: number, text: string): void {
    if (turn !== this.turn) this.flush();
    this.turn = turn;
    this.text += text;
    if (this.text.length >= this.maxChars) this.flush();
    else if (!this.timer) {
      this.timer = setTimeout(() => this.flush(), this.maxMs);
      this.timer.unref();
    }
  }

  /** Sends what has gathered (the turn ended, or the attempt did). */
  flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.text === "") return;
    const text = this.text;
    this.text = "";
    this.send(this.turn, text);
  }
}
