import type { Verdicts } from '../audit/audit-log';
import type { JarEntryPoints } from '../artifacts/jar-entry-points';
import { GatewayError } from '../errors/gateway-error';
import { entryClassProblem } from './entry-class-policy';
import type { ArtifactFacts } from './remote-jars';

/** What one run or plan used, filled in as it goes, for the audit record. */
export interface Trace {
  source: 'uri' | 'fetched' | 'upload';
  /** The request's query string (`?entry-class=...` is Flink 1.x's deprecated form of entryClass). */
  query: string;
  jarId: string;
  artifact?: ArtifactFacts;
  verdicts: Verdicts;
}

/**
 * `gateway.policy.mode`: in `fetched-only`, runs and plans must name a jar URI or a jar id that
 * POST /jars/fetch registered, and start one of that jar's own classes; an uploaded jar never runs.
 */
export class RunPolicy {
  constructor(readonly mode: 'open' | 'fetched-only') {}

  /** fetched-only: a jar id runs only when POST /jars/fetch registered it. */
  checkSource(trace: Trace): void {
    if (this.mode !== 'fetched-only') return;
    if (trace.source === 'upload') {
      trace.verdicts.policy = 'fetched-only: refused an uploaded jar';
      throw new GatewayError('GW_POLICY_FETCHED_ONLY', { what: `running or planning the uploaded jar ${trace.jarId}` });
    }
    trace.verdicts.policy = `fetched-only: ${trace.source === 'uri' ? 'jar URI' : 'jar registered by POST /jars/fetch'}`;
  }

  /** fetched-only: the class a run starts must be one of the vetted jar's own. */
  checkEntryClass(trace: Trace, body: Readonly<Record<string, unknown>> | undefined, points: JarEntryPoints | undefined): void {
    if (this.mode !== 'fetched-only' || trace.source === 'upload') return;
    // Flink takes the body's entryClass, else (1.x) the deprecated ?entry-class= query parameter:
    // each one given must pass, so neither can smuggle in another class.
    const fromBody = typeof body?.entryClass === 'string' && body.entryClass.trim() !== '' ? body.entryClass : undefined;
    const fromQuery = new URLSearchParams(trace.query.replace(/^\?/, '')).getAll('entry-class');
    const problem =
      points === undefined
        ? "the jar's classes are unknown to this gateway"
        : [fromBody, ...fromQuery].map((c) => entryClassProblem(c, points)).find((p) => p !== undefined);
    if (problem === undefined) return;
    trace.verdicts.policy = 'fetched-only: refused the entry class';
    throw new GatewayError('GW_POLICY_ENTRY_CLASS', { problem });
  }
}
