import { randomUUID } from 'node:crypto';

export type FetchPhase = 'queued' | 'checking' | 'downloading' | 'verifying' | 'done' | 'cached' | 'failed';

/** One fetch as shown by GET /gateway/v1/fetches (URIs are redacted). */
export interface FetchRecord {
  id: string;
  uri: string;
  phase: FetchPhase;
  bytes: number;
  /** The object's size, when its store reports one. */
  total?: number | undefined;
  startedAt: string;
  finishedAt?: string;
  sha256?: string;
  error?: string;
}

/** Keeps running fetches and the most recent finished ones. */
export class FetchProgress {
  private readonly records = new Map<string, FetchRecord>();

  constructor(private readonly keepFinished = 100) {}

  start(uri: string): FetchRecord {
    const rec: FetchRecord = { id: randomUUID(), uri, phase: 'queued', bytes: 0, startedAt: new Date().toISOString() };
    this.records.set(rec.id, rec);
    return rec;
  }

  finish(rec: FetchRecord, outcome: { phase: 'done' | 'cached' | 'failed'; sha256?: string; error?: string }): void {
    Object.assign(rec, outcome, { finishedAt: new Date().toISOString() });
    const finished = [...this.records.values()].filter((r) => r.finishedAt);
    for (const old of finished.slice(0, Math.max(0, finished.length - this.keepFinished))) this.records.delete(old.id);
  }

  get(id: string): FetchRecord | undefined {
    return this.records.get(id);
  }

  list(): FetchRecord[] {
    return [...this.records.values()].reverse();
  }
}
