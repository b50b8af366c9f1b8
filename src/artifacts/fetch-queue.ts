import { GatewayError } from '../errors/gateway-error';

/** The fetch slots: bounds concurrent fetches, with a bounded wait queue (beyond it: 503 GW_FETCH_BUSY + Retry-After). */
export class FetchQueue {
  private active = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(
    private readonly max: number,
    private readonly queueLimit: number,
  ) {}

  async acquire(): Promise<() => void> {
    if (this.active >= this.max) {
      if (this.waiting.length >= this.queueLimit) {
        const err = new GatewayError('GW_FETCH_BUSY', { limit: this.max });
        err.headers = { 'retry-after': '5' };
        throw err;
      }
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    } else {
      this.active++;
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiting.shift();
      if (next)
        next(); // the slot passes directly to the next waiter
      else this.active--;
    };
  }

  get queued(): number {
    return this.waiting.length;
  }
}
