/**
 * A tiny writer of Java serialisation streams for tests: enough of the grammar to build a job
 * graph as Flink's classes serialise it, and to break it in every way the reader must survive.
 * Bytes are built by hand (type codes, lengths, handles), so a test can lie about any of them.
 */
export const TC = {
  NULL: 0x70,
  REFERENCE: 0x71,
  CLASSDESC: 0x72,
  OBJECT: 0x73,
  STRING: 0x74,
  ARRAY: 0x75,
  CLASS: 0x76,
  BLOCKDATA: 0x77,
  ENDBLOCKDATA: 0x78,
  RESET: 0x79,
  BLOCKDATALONG: 0x7a,
  EXCEPTION: 0x7b,
  LONGSTRING: 0x7c,
  PROXYCLASSDESC: 0x7d,
  ENUM: 0x7e,
} as const;
export const SC = { WRITE_METHOD: 0x01, SERIALIZABLE: 0x02, EXTERNALIZABLE: 0x04, BLOCK_DATA: 0x08, ENUM: 0x10 } as const;
export const HEADER = Buffer.from([0xac, 0xed, 0x00, 0x05]);

export function u8(n: number): Buffer {
  return Buffer.from([n & 0xff]);
}
export function u16(n: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(n);
  return b;
}
export function i32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeInt32BE(n);
  return b;
}
export function i64(n: bigint): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigInt64BE(n);
  return b;
}
export function utf(s: string): Buffer {
  const b = Buffer.from(s, 'utf8');
  return Buffer.concat([u16(b.length), b]);
}
export function str(s: string): Buffer {
  return Buffer.concat([u8(TC.STRING), utf(s)]);
}
export function ref(handle: number): Buffer {
  return Buffer.concat([u8(TC.REFERENCE), i32(0x7e0000 + handle)]);
}

export type Field = { type: string; name: string; className?: Buffer };

/** TC_CLASSDESC name, uid, flags, fields, (no annotation), super. */
export function classDesc(name: string, flags: number, fields: Field[], superDesc: Buffer = u8(TC.NULL)): Buffer {
  const parts = [u8(TC.CLASSDESC), utf(name), i64(1n), u8(flags), u16(fields.length)];
  for (const f of fields) {
    parts.push(u8(f.type.charCodeAt(0)), utf(f.name));
    if (f.className) parts.push(f.className);
  }
  parts.push(u8(TC.ENDBLOCKDATA), superDesc);
  return Buffer.concat(parts);
}

export function block(bytes: Buffer): Buffer {
  return Buffer.concat([u8(TC.BLOCKDATA), u8(bytes.length), bytes]);
}

/**
 * A JobGraph as Flink 2.x writes one, up to its `jobID` (the reader stops there): primitives,
 * then `jobConfiguration` (a Configuration holding a HashMap of `entries`), then `jobID`.
 * Handles are counted by hand: 0 JobGraph desc, 1-2 its field type strings, 3 the JobGraph, ...
 */
export function jobGraphStream(entries: [string, Buffer][], ids: { lower: bigint; upper: bigint }): Buffer {
  const graphDesc = classDesc('org.apache.flink.runtime.jobgraph.JobGraph', SC.SERIALIZABLE, [
    { type: 'Z', name: 'dynamic' },
    { type: 'J', name: 'initialClientHeartbeatTimeout' },
    { type: 'L', name: 'jobConfiguration', className: str('Lorg/apache/flink/configuration/Configuration;') },
    { type: 'L', name: 'jobID', className: str('Lorg/apache/flink/api/common/JobID;') },
  ]);
  const confDesc = classDesc(
    'org.apache.flink.configuration.Configuration',
    SC.SERIALIZABLE,
    [{ type: 'L', name: 'confData', className: str('Ljava/util/HashMap;') }],
    classDesc('org.apache.flink.api.common.ExecutionConfig$GlobalJobParameters', SC.SERIALIZABLE, []),
  );
  const mapDesc = classDesc('java.util.HashMap', SC.SERIALIZABLE | SC.WRITE_METHOD, [
    { type: 'F', name: 'loadFactor' },
    { type: 'I', name: 'threshold' },
  ]);
  const mapBody = [u8(TC.OBJECT), mapDesc, Buffer.from([0x3f, 0x40, 0, 0]), i32(12), block(Buffer.concat([i32(16), i32(entries.length)]))];
  for (const [k, v] of entries) mapBody.push(str(k), v);
  mapBody.push(u8(TC.ENDBLOCKDATA));
  const idDesc = classDesc(
    'org.apache.flink.api.common.JobID',
    SC.SERIALIZABLE,
    [],
    classDesc('org.apache.flink.util.AbstractID', SC.SERIALIZABLE, [
      { type: 'J', name: 'lowerPart' },
      { type: 'J', name: 'upperPart' },
    ]),
  );
  return Buffer.concat([
    HEADER,
    u8(TC.OBJECT),
    graphDesc,
    u8(0),
    i64(60_000n),
    u8(TC.OBJECT),
    confDesc,
    ...mapBody,
    u8(TC.OBJECT),
    idDesc,
    i64(ids.lower),
    i64(ids.upper),
    // What follows jobID in a real graph (vertices, user classes) is never read: here, garbage.
    Buffer.from([0x42, 0x42, 0x42]),
  ]);
}

/** A boxed Integer as Java writes it (java.lang.Integer extends java.lang.Number). */
export function boxedInt(n: number): Buffer {
  return Buffer.concat([
    u8(TC.OBJECT),
    classDesc('java.lang.Integer', SC.SERIALIZABLE, [{ type: 'I', name: 'value' }], classDesc('java.lang.Number', SC.SERIALIZABLE, [])),
    i32(n),
  ]);
}

/** An enum constant: TC_ENUM, its class (flagged SC_ENUM, super java.lang.Enum), the constant's name. */
export function enumConstant(className: string, constant: string, flags: number = SC.SERIALIZABLE | SC.ENUM): Buffer {
  return Buffer.concat([
    u8(TC.ENUM),
    classDesc(className, flags, [], classDesc('java.lang.Enum', SC.SERIALIZABLE | SC.ENUM, [])),
    str(constant),
  ]);
}
