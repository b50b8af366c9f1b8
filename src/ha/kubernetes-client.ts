import { readFileSync } from 'node:fs';
import { Agent, request } from 'undici';

/**
 * How to reach and authenticate to a Kubernetes API server: what a kubeconfig context or a pod's
 * service account resolves to (kubernetes-connection.ts).
 */
export interface KubernetesConnection {
  /** `https://host:port` (no trailing slash). */
  server: string;
  /** PEM of the CA that signed the API server's certificate; absent: the system's CAs. */
  ca?: string;
  insecureSkipTlsVerify?: boolean;
  /** A bearer token, or the file it is read from (a pod's projected token is rotated in place: read again when it changes). */
  token?: string;
  tokenFile?: string;
  /** A client certificate and key (PEM). */
  cert?: string;
  key?: string;
  /** Where it came from, for log lines and errors (`in-cluster service account`, `kubeconfig ~/.kube/config context x`). */
  source: string;
}

/** The ConfigMap fields the gateway reads and writes. */
export interface ConfigMap {
  apiVersion?: 'v1';
  kind?: 'ConfigMap';
  metadata: {
    name: string;
    namespace?: string;
    resourceVersion?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    creationTimestamp?: string;
  };
  data?: Record<string, string>;
}

export interface WatchEvent {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK';
  object: ConfigMap;
}

/**
 * An answer of the API server that is not a success: `status` and the API's own `reason`
 * (`Conflict`, `AlreadyExists`, `NotFound`, `Forbidden`, `Gone`, ...). `status` 0: the server was
 * not reached or did not answer (connection refused, TLS, timeout).
 */
export class KubernetesApiError extends Error {
  readonly code = 'KUBERNETES_API';
  constructor(
    readonly status: number,
    readonly reason: string,
    message: string,
    readonly verb: string,
    readonly resource: string,
  ) {
    super(message);
    this.name = 'KubernetesApiError';
  }
}

/** The API error of `err`, or undefined (matched on `code`, not `instanceof`: jest's sandbox may load two copies). */
export function kubeError(err: unknown): KubernetesApiError | undefined {
  return (err as { code?: unknown } | null)?.code === 'KUBERNETES_API' ? (err as KubernetesApiError) : undefined;
}

export interface KubernetesClientOptions {
  /** One call's limit (a watch's is its own `timeoutSeconds`). */
  requestTimeoutMs?: number;
}

/** A running watch: `stop` ends it; `done` settles when the stream ends, for whatever reason. */
export interface Watch {
  stop(): void;
  done: Promise<void>;
}

/**
 * The few ConfigMap calls the gateway makes, over undici against the API server's REST API: get,
 * list, create, replace (conditional on `resourceVersion`), delete (with a `resourceVersion`
 * precondition) and watch; plus a SelfSubjectAccessReview to name a missing permission at start-up.
 * Not `@kubernetes/client-node`: it is ESM-only, which this CommonJS project's jest can load only
 * with `--experimental-vm-modules` for the whole suite, and it brings 68 packages for these calls
 * (docs/adr/0031-kubernetes-ha-store.md).
 */
export class KubernetesClient {
  private readonly agent: Agent;
  private readonly timeoutMs: number;
  private token: { text: string; readAt: number } | undefined;

  constructor(
    readonly connection: KubernetesConnection,
    opts: KubernetesClientOptions = {},
  ) {
    this.timeoutMs = opts.requestTimeoutMs ?? 10_000;
    this.agent = new Agent({
      connect: {
        ...(connection.ca ? { ca: connection.ca } : {}),
        ...(connection.cert && connection.key ? { cert: connection.cert, key: connection.key } : {}),
        rejectUnauthorized: connection.insecureSkipTlsVerify !== true,
      },
      keepAliveTimeout: 30_000,
    });
  }

  close(): Promise<void> {
    return this.agent.close();
  }

  /** The bearer token; a token file is read again a minute after the last read (kubelet rotates it in place). */
  private bearer(): string | undefined {
    const { token, tokenFile } = this.connection;
    if (token) return token;
    if (!tokenFile) return undefined;
    if (!this.token || Date.now() - this.token.readAt > 60_000)
      this.token = { text: readFileSync(tokenFile, 'utf8').trim(), readAt: Date.now() };
    return this.token.text;
  }

  private async call<T>(
    verb: string,
    resource: string,
    method: 'GET' | 'POST' | 'PUT' | 'DELETE',
    path: string,
    body?: unknown,
  ): Promise<T> {
    const headers: Record<string, string> = { accept: 'application/json' };
    const bearer = this.bearer();
    if (bearer) headers.authorization = `Bearer ${bearer}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    let res: Awaited<ReturnType<typeof request>>;
    try {
      res = await request(`${this.connection.server}${path}`, {
        method,
        headers,
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
        dispatcher: this.agent,
        headersTimeout: this.timeoutMs,
        bodyTimeout: this.timeoutMs,
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (err) {
      throw new KubernetesApiError(
        0,
        'Unreachable',
        `the Kubernetes API server at ${this.connection.server} cannot be reached (${verb} ${resource}): ${(err as Error).message}`,
        verb,
        resource,
      );
    }
    const text = await res.body.text().catch((err: unknown) => {
      throw new KubernetesApiError(
        0,
        'Unreachable',
        `the Kubernetes API server at ${this.connection.server} broke off its answer (${verb} ${resource}): ${(err as Error).message}`,
        verb,
        resource,
      );
    });
    if (res.statusCode >= 200 && res.statusCode < 300) return (text ? JSON.parse(text) : undefined) as T;
    throw statusError(res.statusCode, text, verb, resource);
  }

  /** The ConfigMap, or undefined when there is none. */
  async getConfigMap(namespace: string, name: string): Promise<ConfigMap | undefined> {
    try {
      return await this.call<ConfigMap>('get', `configmaps/${name}`, 'GET', `${base(namespace)}/${enc(name)}`);
    } catch (err) {
      if (kubeError(err)?.status === 404) return undefined;
      throw err;
    }
  }

  async listConfigMaps(namespace: string, labelSelector: string): Promise<{ items: ConfigMap[]; resourceVersion: string }> {
    const list = await this.call<{ items?: ConfigMap[]; metadata?: { resourceVersion?: string } }>(
      'list',
      'configmaps',
      'GET',
      `${base(namespace)}?labelSelector=${enc(labelSelector)}`,
    );
    return { items: list.items ?? [], resourceVersion: list.metadata?.resourceVersion ?? '' };
  }

  /** Creates it; a ConfigMap of that name already there is a 409 `AlreadyExists`. */
  createConfigMap(namespace: string, cm: ConfigMap): Promise<ConfigMap> {
    return this.call('create', `configmaps/${cm.metadata.name}`, 'POST', base(namespace), { apiVersion: 'v1', kind: 'ConfigMap', ...cm });
  }

  /** Replaces it if it is still at `cm.metadata.resourceVersion`: else 409 `Conflict` (404 when it is gone). */
  replaceConfigMap(namespace: string, cm: ConfigMap): Promise<ConfigMap> {
    return this.call('update', `configmaps/${cm.metadata.name}`, 'PUT', `${base(namespace)}/${enc(cm.metadata.name)}`, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      ...cm,
    });
  }

  /**
   * Deletes it; with `resourceVersion`, only if it is still at that version (else 409 `Conflict`).
   * Returns false when there was none.
   */
  async deleteConfigMap(namespace: string, name: string, resourceVersion?: string): Promise<boolean> {
    const options = { apiVersion: 'v1', kind: 'DeleteOptions', ...(resourceVersion ? { preconditions: { resourceVersion } } : {}) };
    try {
      await this.call('delete', `configmaps/${name}`, 'DELETE', `${base(namespace)}/${enc(name)}`, options);
      return true;
    } catch (err) {
      if (kubeError(err)?.status === 404) return false;
      throw err;
    }
  }

  /**
   * Watches ConfigMaps from `resourceVersion` on (a list's): `onEvent` for each change, until the
   * server ends the watch (after `timeoutSeconds`, or 410 Gone when that version is too old: the
   * caller lists again) or `stop`. `done` rejects with the error that ended it, if any.
   */
  watchConfigMaps(
    namespace: string,
    query: { labelSelector?: string; fieldSelector?: string; resourceVersion: string; timeoutSeconds: number },
    onEvent: (e: WatchEvent) => void,
  ): Watch {
    const controller = new AbortController();
    const params = new URLSearchParams({
      watch: '1',
      allowWatchBookmarks: 'true',
      resourceVersion: query.resourceVersion,
      timeoutSeconds: String(query.timeoutSeconds),
    });
    if (query.labelSelector) params.set('labelSelector', query.labelSelector);
    if (query.fieldSelector) params.set('fieldSelector', query.fieldSelector);
    const headers: Record<string, string> = { accept: 'application/json' };
    const bearer = this.bearer();
    if (bearer) headers.authorization = `Bearer ${bearer}`;
    const done = (async () => {
      let res: Awaited<ReturnType<typeof request>>;
      try {
        res = await request(`${this.connection.server}${base(namespace)}?${params}`, {
          method: 'GET',
          headers,
          dispatcher: this.agent,
          headersTimeout: this.timeoutMs,
          bodyTimeout: 0,
          signal: controller.signal,
        });
      } catch (err) {
        if (controller.signal.aborted) return;
        throw new KubernetesApiError(
          0,
          'Unreachable',
          `the Kubernetes API server at ${this.connection.server} cannot be reached (watch configmaps): ${(err as Error).message}`,
          'watch',
          'configmaps',
        );
      }
      if (res.statusCode !== 200) throw statusError(res.statusCode, await res.body.text().catch(() => ''), 'watch', 'configmaps');
      let pending = '';
      try {
        for await (const chunk of res.body) {
          pending += (chunk as Buffer).toString('utf8');
          let nl = pending.indexOf('\n');
          while (nl >= 0) {
            const line = pending.slice(0, nl).trim();
            pending = pending.slice(nl + 1);
            nl = pending.indexOf('\n');
            if (!line) continue;
            const event = JSON.parse(line) as { type: string; object: unknown };
            // An ERROR event carries a Status: 410 Gone (the version is compacted away) ends the watch.
            if (event.type === 'ERROR') {
              const s = event.object as { code?: number; reason?: string; message?: string };
              throw new KubernetesApiError(
                s.code ?? 500,
                s.reason ?? 'Error',
                `watch configmaps: ${s.message ?? 'ended by the API server'}`,
                'watch',
                'configmaps',
              );
            }
            onEvent(event as WatchEvent);
          }
        }
      } catch (err) {
        if (controller.signal.aborted) return;
        if (kubeError(err)) throw err;
        throw new KubernetesApiError(
          0,
          'Unreachable',
          `the watch of configmaps on ${this.connection.server} broke off: ${(err as Error).message}`,
          'watch',
          'configmaps',
        );
      }
    })();
    return { stop: () => controller.abort(), done };
  }

  /**
   * Whether this identity may `verb` ConfigMaps in the namespace (a SelfSubjectAccessReview, which
   * every authenticated user may create); undefined when the review itself cannot be made.
   */
  async mayConfigMaps(namespace: string, verb: string): Promise<boolean | undefined> {
    try {
      const review = await this.call<{ status?: { allowed?: boolean } }>(
        'create',
        'selfsubjectaccessreviews',
        'POST',
        '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews',
        {
          apiVersion: 'authorization.k8s.io/v1',
          kind: 'SelfSubjectAccessReview',
          spec: { resourceAttributes: { namespace, verb, resource: 'configmaps', group: '' } },
        },
      );
      return review.status?.allowed === true;
    } catch (err) {
      if (kubeError(err)?.status === 403 || kubeError(err)?.status === 404) return undefined;
      throw err;
    }
  }
}

function base(namespace: string): string {
  return `/api/v1/namespaces/${enc(namespace)}/configmaps`;
}

const enc = encodeURIComponent;

function statusError(status: number, text: string, verb: string, resource: string): KubernetesApiError {
  let reason = `HTTP ${status}`;
  let message = text.slice(0, 300);
  try {
    const s = JSON.parse(text) as { reason?: string; message?: string };
    if (s.reason) reason = s.reason;
    if (s.message) message = s.message;
  } catch {
    /* not a Status object: keep the text */
  }
  return new KubernetesApiError(
    status,
    reason,
    `the Kubernetes API server refused ${verb} ${resource} (HTTP ${status} ${reason}): ${message}`,
    verb,
    resource,
  );
}

/** Reads a PEM file named by a kubeconfig or the service account, as text. */
export function readPem(file: string): string {
  return readFileSync(file, 'utf8');
}
