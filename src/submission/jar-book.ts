import type { JarEntryPoints } from '../artifacts/jar-entry-points';
import { GatewayError } from '../errors/gateway-error';

/**
 * What the gateway knows of the jars it put on the JobManager: who owns each, which ones POST
 * /jars/fetch vetted (and what they can start), and which uploads hold classes. Jars the gateway did
 * not see arrive (before a restart, or uploaded to the JobManager directly) are in none of these and
 * are not restricted. What the jars may take is the JarBudget's (jar-budget.ts).
 */
export class JarBook {
  /** Jar ids POST /jars/fetch registered, with their entry points: the only ids fetched-only mode runs. */
  private readonly fetched = new Map<string, JarEntryPoints>();
  /** Who put each jar there: only that principal may run, plan or delete it. */
  private readonly owners = new Map<string, string>();
  /** Uploaded jars that hold classes: a run by URI replaces only a placeholder, never one of these. */
  private readonly withClasses = new Set<string>();
  /**
   * The SHA-256 of each jar's bytes: a run names its jar by this in its fingerprint, since a client
   * that uploads a fresh copy for every attempt (the operator's two-hop jarURI) gets a new id each time.
   */
  private readonly digests = new Map<string, string>();

  /** The SHA-256 of the jar's bytes, when the gateway saw them arrive. */
  digestOf(jarId: string): string | undefined {
    return this.digests.get(jarId);
  }

  /** Records the SHA-256 of a jar the gateway put on the JobManager. */
  recordDigest(jarId: string, sha256: string): void {
    this.digests.set(jarId, sha256);
  }

  isFetched(jarId: string): boolean {
    return this.fetched.has(jarId);
  }

  entryPointsOf(jarId: string): JarEntryPoints | undefined {
    return this.fetched.get(jarId);
  }

  hasClasses(jarId: string): boolean {
    return this.withClasses.has(jarId);
  }

  /** Records who uploaded `jarId`, and whether it holds classes (so is no placeholder). */
  own(jarId: string, principal: string, hasClasses: boolean): void {
    this.owners.set(jarId, principal);
    if (hasClasses) this.withClasses.add(jarId);
  }

  /** Throws 403 GW_AUTH_JAR_OWNER when `jarId` belongs to another principal. */
  checkOwner(jarId: string, principal: string, action: string): void {
    const owner = this.owners.get(jarId);
    if (owner !== undefined && owner !== principal) throw new GatewayError('GW_AUTH_JAR_OWNER', { jarId, action, principal });
  }

  /** A jar POST /jars/fetch left on the JobManager: it now belongs to its caller, like an upload. */
  recordFetched(jarId: string, points: JarEntryPoints, principal: string): void {
    this.fetched.set(jarId, points);
    this.owners.set(jarId, principal);
  }

  /** A jar deleted from the JobManager is no longer a fetched one, nor anyone's. */
  forget(jarId: string): void {
    this.fetched.delete(jarId);
    this.owners.delete(jarId);
    this.withClasses.delete(jarId);
    this.digests.delete(jarId);
  }
}
