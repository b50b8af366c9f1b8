import { readFileSync } from 'node:fs';
import { createServer, type RequestListener, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { coreOptions } from '../config/options';
import type { Configuration } from '../config/registry';

/**
 * The gateway's listener: plain HTTP, or HTTPS when gateway.tls.cert/key (PEM) or
 * gateway.tls.keystore (PKCS12) is set. With gateway.tls.client-ca, client certificates are
 * requested and verified, but a request without one is not cut off at the TLS layer: the
 * authenticator decides (health, readiness and GET /config must stay reachable for probes).
 */
export function createListener(config: Configuration, app: RequestListener): Server {
  const timeouts = listenerTimeouts(config);
  const cert = config.getOptional(coreOptions.tlsCert);
  const key = config.getOptional(coreOptions.tlsKey);
  const keystore = config.getOptional(coreOptions.tlsKeystore);
  const clientCa = config.getOptional(coreOptions.tlsClientCa);
  if (!cert && !keystore) return createServer(timeouts, app);
  const identity = keystore
    ? { pfx: readFileSync(keystore), passphrase: config.getOptional(coreOptions.tlsKeystorePassword) ?? '' }
    : { cert: readFileSync(cert!, 'utf8'), key: readFileSync(key ?? '', 'utf8') };
  return createHttpsServer(
    {
      ...timeouts,
      ...identity,
      ...(clientCa ? { ca: readFileSync(clientCa, 'utf8'), requestCert: true, rejectUnauthorized: false } : {}),
    },
    app,
  ) as unknown as Server;
}

/**
 * Bounds on what a client may hold: headers within gateway.http.headers-timeout, the whole request
 * within gateway.http.request-timeout (Node answers 408 and closes), so a dripping body cannot keep
 * a socket forever.
 */
export function listenerTimeouts(config: Configuration): {
  requestTimeout: number;
  headersTimeout: number;
  keepAliveTimeout: number;
  connectionsCheckingInterval: number;
} {
  const requestTimeout = config.get(coreOptions.httpRequestTimeout);
  const headersTimeout = Math.min(config.get(coreOptions.httpHeadersTimeout), requestTimeout);
  // Node checks both bounds on this interval (default 30 s, which would stretch a 20 s bound to 50 s).
  return { requestTimeout, headersTimeout, keepAliveTimeout: 65_000, connectionsCheckingInterval: Math.min(1_000, headersTimeout) };
}

/**
 * Drains `server`: requests in flight finish; a keep-alive connection is closed as soon as it goes
 * idle (not after its idle timeout); whatever is still open after `drainMs` is cut.
 */
export function drainServer(server: Server, drainMs: number): Promise<void> {
  return new Promise<void>((resolve) => {
    const sweep = setInterval(() => server.closeIdleConnections(), 100);
    const deadline = setTimeout(() => server.closeAllConnections(), drainMs);
    server.close(() => {
      clearInterval(sweep);
      clearTimeout(deadline);
      resolve();
    });
    server.closeIdleConnections();
  });
}
