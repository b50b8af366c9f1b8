import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** PEM key and certificate for a test HTTPS server. */
export interface TlsMaterial {
  key: string;
  cert: string;
}

/**
 * A fresh self-signed certificate for `localhost` and `127.0.0.1`, made with the machine's openssl
 * (`openssl req -x509`). Nothing is checked in: each test run has its own key. An EC key
 * keeps generation fast (tens of milliseconds).
 */
export function makeSelfSignedCert(commonName = 'localhost'): TlsMaterial {
  const dir = mkdtempSync(join(tmpdir(), 'gw-tls-'));
  try {
    const keyFile = join(dir, 'key.pem');
    const certFile = join(dir, 'cert.pem');
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-keyout',
        keyFile,
        '-out',
        certFile,
        '-days',
        '2',
        '-subj',
        `/CN=${commonName}`,
        '-addext',
        'subjectAltName=DNS:localhost,IP:127.0.0.1',
      ],
      { stdio: 'pipe' },
    );
    return { key: readFileSync(keyFile, 'utf8'), cert: readFileSync(certFile, 'utf8') };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Paths of a PEM certificate and its key, as written by {@link makeTestCa} / {@link issueCert}. */
export interface CertFiles {
  cert: string;
  key: string;
}

const ecKey = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

/** A fresh CA (`<name>-ca.pem`, `<name>-ca.key` in `dir`) for tests that need more than one identity. */
export function makeTestCa(dir: string, name: string): CertFiles {
  const files = { cert: join(dir, `${name}-ca.pem`), key: join(dir, `${name}-ca.key`) };
  execFileSync(
    'openssl',
    ['req', '-x509', ...ecKey, '-keyout', files.key, '-out', files.cert, '-days', '2', '-subj', `/CN=${name} test CA`],
    { stdio: 'pipe' },
  );
  return files;
}

/**
 * A certificate signed by `ca` (`<name>.pem`, `<name>.key` in `dir`): a server certificate for
 * `altNames` (default `localhost` and `127.0.0.1`), or a client certificate (extendedKeyUsage
 * clientAuth) whose CN is what the gateway takes as the principal, or both (a Flink REST keystore
 * serves the endpoint and its own clients). EC P-256 by default; `key: 'rsa'`
 * for peers whose cipher suites need an RSA server key (Flink's default `security.ssl.algorithms`
 * are TLS_ECDHE_RSA_* only).
 */
export function issueCert(
  dir: string,
  ca: CertFiles,
  name: string,
  opts: { cn: string; use: 'server' | 'client' | 'server+client'; key?: 'ec' | 'rsa'; altNames?: string },
): CertFiles {
  const files = { cert: join(dir, `${name}.pem`), key: join(dir, `${name}.key`) };
  const csr = join(dir, `${name}.csr`);
  const ext = join(dir, `${name}.ext`);
  const newKey = opts.key === 'rsa' ? ['-newkey', 'rsa:2048', '-nodes'] : ecKey;
  execFileSync('openssl', ['req', ...newKey, '-keyout', files.key, '-out', csr, '-subj', `/CN=${opts.cn}`], { stdio: 'pipe' });
  const altNames = opts.altNames ?? 'DNS:localhost,IP:127.0.0.1';
  const usage = { server: 'serverAuth', client: 'clientAuth', 'server+client': 'serverAuth,clientAuth' }[opts.use];
  writeFileSync(ext, `${opts.use === 'client' ? '' : `subjectAltName=${altNames}\n`}extendedKeyUsage=${usage}\n`);
  execFileSync(
    'openssl',
    ['x509', '-req', '-in', csr, '-CA', ca.cert, '-CAkey', ca.key, '-CAcreateserial', '-out', files.cert, '-days', '2', '-extfile', ext],
    { stdio: 'pipe' },
  );
  return files;
}
