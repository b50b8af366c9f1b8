import { createSecureContext } from 'node:tls';
import { coreOptions as o } from '../config/options';
import { caBundleRule, pair, tlsMaterial } from '../config/rule-kit';
import type { ConfigRule } from '../config/registry';

/** The rules across the JobManager connection's options: its client certificate and the CA it trusts. */
export const clusterRules: readonly ConfigRule[] = [
  pair(o.clusterCert, o.clusterKey, 'a client certificate for the JobManager and its key'),
  tlsMaterial([o.clusterCert, o.clusterKey], ([cert, key]) => {
    if (cert && key) createSecureContext({ cert, key });
  }),
  caBundleRule(o.clusterCa),
];
