import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** PEM key and certificate for a test HTTPS server. */
export interface TlsMaterial {
  key: string;
  cert: string;
}

/**
 * A fresh self-signed certificate for `localhost` and `127.0.0.1`, made with the machine's openssl
 * (as in reference/storage.md §5.3). Nothing is checked in: each test run has its own key. An EC key
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
        'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
        '-keyout', keyFile, '-out', certFile, '-days', '2', '-subj', `/CN=${commonName}`,
        '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1',
      ],
      { stdio: 'pipe' },
    );
    return { key: readFileSync(keyFile, 'utf8'), cert: readFileSync(certFile, 'utf8') };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
