import type { Logger } from 'pino';
import { GatewayError } from '../errors/gateway-error';
import type { Claim, ClaimResult } from '../submission/job-claims';
import { parseStoredRegistration, type StoredRegistration } from '../submission/registration-store';
import { type ConfigMap, type KubernetesClient, kubeError, type Watch } from './kubernetes-client';
import { flinkClusterLabels, type KubernetesHaSettings } from './kubernetes-settings';
import type { SealFailure } from './record-seal';
import { type MirrorOptions, RegistrationMirror } from './registration-mirror';
import { isClaimOf, RECORD_KIND, type RejectedRecord, type SharedJobClaims } from './shared-store';

/**
 * Seals a record for a place and opens what was read from one (src/ha/record-seal.ts's RecordSeal,
 * under the replicas' gateway.ha.shared-secret): a record that does not open is never acted on.
 */
export interface RecordSealer {
  seal(kind: string, where: string, body: string): string;
  open(kind: string, where: string, data: string): { ok: true; body: string } | { ok: false; reason: SealFailure };
}

/** The label that tells the gateway's ConfigMaps apart (and which kind each is). */
export const GATEWAY_RECORD_LABEL = 'flink-jar-gateway/record';

/**
 * The gateway's ConfigMaps for a cluster: `<cluster-id>-jar-gateway-registration-<jobId>` and
 * `<cluster-id>-jar-gateway-claim-<jobId>`, labelled as Flink labels its HA ConfigMaps
 * (`app=<cluster-id>`, `type=flink-native-kubernetes`), so the operator deletes them with a session
 * cluster. Their names never end in `-config-map` or `-jobmanager-leader` and their data keys never
 * start with `jobGraph-`/`executionPlan-`: the operator would take them for Flink's HA metadata.
 */
export function gatewayConfigMapName(clusterId: string, kind: 'registration' | 'claim', jobId: string): string {
  return `${clusterId}-jar-gateway-${kind}-${jobId}`;
}

/** The place a record is sealed for (part of what its MAC covers): `kubernetes:<namespace>/<ConfigMap>/<data key>`. */
export function kubernetesRecordPlace(namespace: string, configMap: string, key: string): string {
  return `kubernetes:${namespace}/${configMap}/${key}`;
}

/** The labels of the gateway's ConfigMaps of one kind (Flink's cluster labels, and its own). */
export function labelsOf(clusterId: string, kind: 'registration' | 'claim'): Record<string, string> {
  return { ...flinkClusterLabels(clusterId), 'app.kubernetes.io/managed-by': 'flink-jar-gateway', [GATEWAY_RECORD_LABEL]: kind };
}

function selectorOf(clusterId: string, kind: 'registration' | 'claim'): string {
  return Object.entries(labelsOf(clusterId, kind))
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
}

const JOB_ID = /^[0-9a-f]{32}$/;
const WATCH_SECONDS = 300;

/** A failure of the API server as the client sees it: 503 with Retry-After, nothing ran. */
function unavailable(settings: KubernetesHaSettings, operation: string, err: unknown): GatewayError {
  if ((err as { code?: unknown }).code === 'GW_HA_STORE_UNAVAILABLE') return err as GatewayError;
  return new GatewayError(
    'GW_HA_STORE_UNAVAILABLE',
    { store: `Kubernetes ConfigMaps in namespace ${settings.namespace}`, operation, reason: (err as Error)?.message ?? String(err) },
    { cause: err },
  );
}

/** Common plumbing of the two stores: where a record lives, sealing and opening it. */
class Records {
  constructor(
    readonly settings: KubernetesHaSettings,
    readonly kind: 'registration' | 'claim',
    private readonly sealer: RecordSealer,
    private readonly log: Logger,
    private readonly onRejected: RejectedRecord | undefined,
  ) {}

  name(jobId: string): string {
    return gatewayConfigMapName(this.settings.clusterId, this.kind, jobId);
  }

  /** What the seal binds a record to: the namespace, the ConfigMap and the data key. */
  where(jobId: string): string {
    return kubernetesRecordPlace(this.settings.namespace, this.name(jobId), this.kind);
  }

  /** The kind a record is sealed as: the same strings on every engine. */
  get sealKind(): string {
    return RECORD_KIND[this.kind];
  }

  configMap(jobId: string, body: string, resourceVersion?: string): ConfigMap {
    return {
      metadata: {
        name: this.name(jobId),
        labels: labelsOf(this.settings.clusterId, this.kind),
        ...(resourceVersion ? { resourceVersion } : {}),
      },
      data: { [this.kind]: this.sealer.seal(this.sealKind, this.where(jobId), body) },
    };
  }

  /** The job id a ConfigMap of this kind is for (undefined: not one of ours). */
  jobIdOf(cm: ConfigMap): string | undefined {
    const prefix = gatewayConfigMapName(this.settings.clusterId, this.kind, '');
    const jobId = cm.metadata.name.startsWith(prefix) ? cm.metadata.name.slice(prefix.length) : '';
    return JOB_ID.test(jobId) ? jobId : undefined;
  }

  /**
   * The record, if it opens under the replicas' secret (sealed for this kind and this place) and
   * `parse` reads it as a record of this job; anything else is logged, counted and treated as absent.
   */
  open<T>(jobId: string, cm: ConfigMap, parse: (jobId: string, value: unknown) => T | undefined): T | undefined {
    const opened = this.sealer.open(this.sealKind, this.where(jobId), cm.data?.[this.kind] ?? '');
    if (!opened.ok) return this.rejected(jobId, cm, opened.reason);
    let value: T | undefined;
    try {
      value = parse(jobId, JSON.parse(opened.body) as unknown);
    } catch {
      value = undefined;
    }
    return value ?? this.rejected(jobId, cm, 'malformed');
  }

  private rejected(jobId: string, cm: ConfigMap, reason: SealFailure | 'malformed'): undefined {
    this.log.error(
      { jobId, configMap: cm.metadata.name, namespace: this.settings.namespace, reason },
      'a shared record does not verify under gateway.ha.shared-secret (forged, altered, moved, or written without the secret); ignored',
    );
    this.onRejected?.(this.sealKind, reason);
    return undefined;
  }
}

/** A registration of the job `jobId`, or undefined. */
const registrationOf = (jobId: string, value: unknown): StoredRegistration | undefined => {
  const rec = parseStoredRegistration(value);
  return rec?.jobId === jobId ? rec : undefined;
};

/** A claim of the job `jobId`, or undefined. */
const claimOf = (jobId: string, value: unknown): Claim | undefined => (isClaimOf(jobId, value) ? value : undefined);

/** `retryMs` also paces listing again after a broken watch. */
export interface KubernetesStoreOptions extends MirrorOptions {
  sealer: RecordSealer;
  onRejected?: RejectedRecord;
}

/**
 * The job registrations of every replica as ConfigMaps in the cluster's namespace (ADR 0031), one
 * per job, holding the redacted JSON the file store keeps. Each replica lists them once and then
 * follows a watch from the list's resourceVersion; a watch that ends is resumed, one the server ends
 * with 410 Gone (its version compacted away) or that breaks is replaced by a new list, retried
 * every `retryMs` until it succeeds. Writes are conditional on `resourceVersion` (a lost race is
 * read again and retried); a rolled-back attempt removes the record only if it is the one that
 * attempt wrote, with the version it was read at as the delete's precondition.
 */
export class KubernetesRegistrationStore extends RegistrationMirror {
  private readonly records: Records;
  private resourceVersion = '';
  private watch: Watch | undefined;

  constructor(
    private readonly client: KubernetesClient,
    private readonly settings: KubernetesHaSettings,
    log: Logger,
    opts: KubernetesStoreOptions,
  ) {
    super(log, opts);
    this.records = new Records(settings, 'registration', opts.sealer, log, opts.onRejected);
  }

  get where(): string {
    return `kubernetes ${this.client.connection.server} namespace ${this.settings.namespace} ConfigMaps ${this.records.name('<jobId>')}`;
  }

  async init(): Promise<void> {
    await this.sync();
  }

  async put(reg: StoredRegistration): Promise<void> {
    const body = JSON.stringify(reg);
    try {
      for (let attempt = 0; ; attempt++) {
        try {
          await this.client.createConfigMap(this.settings.namespace, this.records.configMap(reg.jobId, body));
          break;
        } catch (err) {
          if (kubeError(err)?.status !== 409) throw err;
        }
        // There is one: replace it at the version read (another replica's write in between is a 409: read again).
        const current = await this.client.getConfigMap(this.settings.namespace, this.records.name(reg.jobId));
        if (!current) continue;
        try {
          await this.client.replaceConfigMap(
            this.settings.namespace,
            this.records.configMap(reg.jobId, body, current.metadata.resourceVersion),
          );
          break;
        } catch (err) {
          if (kubeError(err)?.status !== 409 || attempt >= 4) throw err;
        }
      }
    } catch (err) {
      throw unavailable(this.settings, 'job registration', err);
    }
    this.stored(reg);
  }

  async remove(jobId: string, attempt?: string): Promise<void> {
    const { namespace } = this.settings;
    try {
      if (attempt === undefined) {
        await this.client.deleteConfigMap(namespace, this.records.name(jobId));
        this.dropped(jobId);
        return;
      }
      // Compare and delete: a retry on another replica may have replaced the record meanwhile.
      const cm = await this.client.getConfigMap(namespace, this.records.name(jobId));
      if (!cm) return;
      // Only a record this attempt can prove is its own is removed: a forged one is left alone.
      if (this.records.open(jobId, cm, registrationOf)?.attempt !== attempt) return;
      try {
        await this.client.deleteConfigMap(namespace, this.records.name(jobId), cm.metadata.resourceVersion);
        this.dropped(jobId);
      } catch (err) {
        if (kubeError(err)?.status !== 409) throw err;
      }
    } catch (err) {
      throw unavailable(this.settings, 'removal of a job registration', err);
    }
  }

  override stop(): void {
    super.stop();
    this.watch?.stop();
  }

  /** Lists every registration (a full read each time) and follows them from there. */
  protected async readAll(): Promise<void> {
    if (this.isStopped) return;
    const { items, resourceVersion } = await this.client.listConfigMaps(
      this.settings.namespace,
      selectorOf(this.settings.clusterId, 'registration'),
    );
    const seen = new Set<string>();
    for (const cm of items) {
      const jobId = this.records.jobIdOf(cm);
      if (!jobId) continue;
      seen.add(jobId);
      this.apply(jobId, cm);
    }
    this.keepOnly(seen);
    this.resourceVersion = resourceVersion;
    this.follow();
  }

  /** (Re)starts the watch from the last version seen; a watch is never left unfollowed. */
  private follow(): void {
    this.watch?.stop();
    if (this.isStopped) return;
    const watch = this.client.watchConfigMaps(
      this.settings.namespace,
      {
        labelSelector: selectorOf(this.settings.clusterId, 'registration'),
        resourceVersion: this.resourceVersion,
        timeoutSeconds: WATCH_SECONDS,
      },
      (e) => {
        if (e.object.metadata.resourceVersion) this.resourceVersion = e.object.metadata.resourceVersion;
        if (e.type === 'BOOKMARK') return;
        const jobId = this.records.jobIdOf(e.object);
        if (!jobId) return;
        if (e.type === 'DELETED') this.gone(jobId);
        else this.apply(jobId, e.object);
      },
    );
    this.watch = watch;
    watch.done.then(
      // Ended by the server after its timeout: go on from the last version seen.
      () => {
        if (this.watch === watch && !this.isStopped) this.follow();
      },
      (err: unknown) => {
        if (this.watch !== watch || this.isStopped) return;
        this.watch = undefined;
        // 410 Gone: that version is compacted away; anything else: the server is out of reach. List again.
        if (kubeError(err)?.status !== 410)
          this.log.warn(
            { err: (err as Error).message, retryInMs: this.retryMs },
            'the watch of the shared job registrations ended; listing them again shortly',
          );
        this.retryLater();
      },
    );
  }

  private apply(jobId: string, cm: ConfigMap): void {
    const rec = this.records.open(jobId, cm, registrationOf);
    if (rec) this.found(rec);
  }
}

/**
 * Job-id claims as ConfigMaps, one per claimed id, created atomically (a second create is 409
 * AlreadyExists): a retry on any replica is a retry, anyone else's run under a used id a conflict.
 * An expired (or unreadable) claim is deleted with its resourceVersion as precondition, so two
 * replicas cannot both replace it.
 */
export class KubernetesJobClaims implements SharedJobClaims {
  private readonly records: Records;

  constructor(
    private readonly client: KubernetesClient,
    private readonly settings: KubernetesHaSettings,
    private readonly opts: {
      retentionMs: number;
      wallClock?: () => number;
      sealer: RecordSealer;
      log: Logger;
      onRejected?: RejectedRecord;
    },
  ) {
    this.records = new Records(settings, 'claim', opts.sealer, opts.log, opts.onRejected);
  }

  async claim(jobId: string, principal: string, fingerprint: string): Promise<ClaimResult> {
    try {
      return await this.claimOnce(jobId, principal, fingerprint);
    } catch (err) {
      throw unavailable(this.settings, 'job id claim', err);
    }
  }

  private async claimOnce(jobId: string, principal: string, fingerprint: string): Promise<ClaimResult> {
    const now = (this.opts.wallClock ?? Date.now)();
    const mine: Claim = { jobId, principal, fingerprint, at: now };
    const { namespace } = this.settings;
    for (let attempt = 0; attempt < 5; attempt++) {
      try {
        await this.client.createConfigMap(namespace, this.records.configMap(jobId, JSON.stringify(mine)));
        return 'new';
      } catch (err) {
        if (kubeError(err)?.status !== 409) throw err;
      }
      const cm = await this.client.getConfigMap(namespace, this.records.name(jobId));
      if (!cm) continue; // released meanwhile
      const existing = this.records.open(jobId, cm, claimOf);
      if (existing && existing.at >= now - this.opts.retentionMs) {
        return existing.principal === principal && existing.fingerprint === fingerprint ? 'retry' : 'conflict';
      }
      // Expired (or unreadable): replace it, unless another replica changed it first.
      try {
        await this.client.deleteConfigMap(namespace, this.records.name(jobId), cm.metadata.resourceVersion);
      } catch (err) {
        if (kubeError(err)?.status !== 409) throw err;
      }
    }
    return 'conflict';
  }

  async release(jobId: string): Promise<void> {
    try {
      await this.client.deleteConfigMap(this.settings.namespace, this.records.name(jobId));
    } catch (err) {
      throw unavailable(this.settings, 'release of a job id claim', err);
    }
  }

  async prune(): Promise<number> {
    const cutoff = (this.opts.wallClock ?? Date.now)() - this.opts.retentionMs;
    const { items } = await this.client.listConfigMaps(this.settings.namespace, selectorOf(this.settings.clusterId, 'claim'));
    let removed = 0;
    for (const cm of items) {
      const jobId = this.records.jobIdOf(cm);
      if (!jobId) continue;
      const at = this.records.open(jobId, cm, claimOf)?.at;
      if (at !== undefined && at >= cutoff) continue;
      try {
        if (await this.client.deleteConfigMap(this.settings.namespace, cm.metadata.name, cm.metadata.resourceVersion)) removed++;
      } catch (err) {
        if (kubeError(err)?.status !== 409) throw err;
      }
    }
    return removed;
  }

  async flush(): Promise<void> {
    /* every write is awaited */
  }
}
