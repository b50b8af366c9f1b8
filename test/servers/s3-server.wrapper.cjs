'use strict';
// Named *.wrapper.cjs, not s3-server.cjs: jest resolves '../servers/s3-server' to a .cjs before a .ts.
// A SigV4-checking S3 server for tests: @20minutes/s3rver plus
//  - access control: no anonymous requests, and a per-key bucket list standing in for bucket policies;
//  - object versioning for the buckets in S3RVER_VERSIONED_BUCKETS. s3rver answers PutBucketVersioning
//    with 501 NotImplemented and ignores ?versionId=, so this wrapper adds the part the gateway
//    reads: each PUT gets a version id (x-amz-version-id), GET/HEAD ?versionId= serve that version,
//    an unknown id is 404 NoSuchVersion. The signature is still verified by s3rver first.
// Usage: node s3-server.wrapper.cjs <data-dir>, env S3RVER_KEYS="AKIDA:secretA,AKIDB:secretB"
//   S3RVER_POLICY="AKIDA:jars-a|jars-c,AKIDB:jars-b" S3RVER_BUCKETS="jars-a,jars-b" S3RVER_VERSIONED_BUCKETS="jars-a"
// Prints "S3RVER_READY http://127.0.0.1:PORT" once listening.
const { randomUUID } = require('node:crypto');
const S3rver = require('@20minutes/s3rver');
const AWSAccount = require('@20minutes/s3rver/lib/models/account');
const S3Error = require('@20minutes/s3rver/lib/models/error');
const objectCtrl = require('@20minutes/s3rver/lib/controllers/object');

const list = (name) => (process.env[name] || '').split(',').map((s) => s.trim()).filter(Boolean);
const directory = process.argv[2];
if (!directory) {
  console.error('usage: s3-server.wrapper.cjs <data-dir>');
  process.exit(2);
}

AWSAccount.DUMMY_ACCOUNT.revokeAccessKey('S3RVER');
for (const pair of list('S3RVER_KEYS')) {
  const i = pair.indexOf(':');
  AWSAccount.DUMMY_ACCOUNT.createKeyPair(pair.slice(0, i), pair.slice(i + 1));
}
const policy = new Map(
  list('S3RVER_POLICY').map((p) => {
    const [id, buckets] = p.split(':');
    return [id, new Set(buckets.split('|'))];
  }),
);

// --- versioning -------------------------------------------------------------------------------
const versioned = new Set(list('S3RVER_VERSIONED_BUCKETS'));
const versions = new Map(); // "bucket/key" -> { current, ids: Set }
const shadowKey = (key, id) => `.s3rver-versions/${id}/${key}`;

for (const name of ['putObject', 'putObjectCopy', 'completeMultipartUpload']) {
  const original = objectCtrl[name];
  objectCtrl[name] = async function versionedWrite(ctx) {
    await original(ctx);
    const { bucket, key } = ctx.params;
    if (!versioned.has(bucket) || ctx.status >= 300) return;
    const id = randomUUID().replace(/-/g, '');
    await ctx.store.copyObject(bucket, key, bucket, shadowKey(key, id));
    const entry = versions.get(`${bucket}/${key}`) || { current: undefined, ids: new Set() };
    entry.current = id;
    entry.ids.add(id);
    versions.set(`${bucket}/${key}`, entry);
    ctx.set('x-amz-version-id', id);
  };
}

const originalGet = objectCtrl.getObject; // serves GET and HEAD
objectCtrl.getObject = async function versionedGet(ctx) {
  const { bucket, key } = ctx.params;
  const id = ctx.query.versionId;
  if (!versioned.has(bucket)) return originalGet(ctx);
  const entry = versions.get(`${bucket}/${key}`);
  if (id === undefined) {
    await originalGet(ctx);
    if (entry) ctx.set('x-amz-version-id', entry.current);
    return;
  }
  if (!entry || !entry.ids.has(id)) {
    throw new S3Error('NoSuchVersion', 'The specified version does not exist.', { Key: key, VersionId: id });
  }
  ctx.params.key = shadowKey(key, id);
  try {
    await originalGet(ctx);
  } finally {
    ctx.params.key = key;
  }
  ctx.set('x-amz-version-id', id);
};

// --- server -----------------------------------------------------------------------------------
const app = new S3rver({
  address: '127.0.0.1',
  port: 0,
  silent: true,
  directory,
  vhostBuckets: false,
  configureBuckets: (list('S3RVER_BUCKETS').length ? list('S3RVER_BUCKETS') : ['jars']).map((name) => ({ name })),
});

// Just before router.routes(): runs before s3rver's own authentication, which verifies the signature.
app.middleware.splice(app.middleware.length - 1, 0, async function accessControl(ctx, next) {
  const header = /Credential=([^/]+)\//.exec(ctx.get('authorization') || '');
  const id = (header && header[1]) || (ctx.query['X-Amz-Credential'] || '').split('/')[0] || undefined;
  const bucket = decodeURIComponent(ctx.path.split('/')[1] || '');
  if (!id || (bucket && policy.has(id) && !policy.get(id).has(bucket))) throw new S3Error('AccessDenied', 'Access Denied');
  return next();
});

app.run().then(
  ({ address, port }) => console.log(`S3RVER_READY http://${address}:${port}`),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
// Nothing to flush (the parent removes the data directory), so stop at once, open keep-alive sockets or not.
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0));
