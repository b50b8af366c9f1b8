import { readFirstObject } from '../../../../src/submission/job-graph/java-object-stream';
import { readJobGraph } from '../../../../src/submission/job-graph/job-graph-reader';
import {
  block,
  boxedInt,
  classDesc,
  enumConstant,
  HEADER,
  i32,
  i64,
  jobGraphStream,
  ref,
  SC,
  str,
  TC,
  u16,
  u8,
  utf,
} from '../../../helpers/java-stream-writer';

const IDS = { lower: 0x0123456789abcdefn, upper: -2n };
const JOB_ID = '0123456789abcdef' + 'fffffffffffffffe';

/** Every hostile stream must end in this: a 400's reason, never another error, a crash or a hang. */
function unreadable(bytes: Buffer): string {
  try {
    readJobGraph(bytes);
  } catch (err) {
    expect((err as { code?: string }).code).toBe('JOB_GRAPH_UNREADABLE');
    return (err as Error).message;
  }
  throw new Error('the stream was read');
}

describe('job graph reader', () => {
  it('reads the job id (lowerPart, then upperPart, as Flink prints a JobID) and the configuration as text', () => {
    const graph = readJobGraph(
      jobGraphStream(
        [
          ['security.delegation.job.team-store.bucket', str('team-a')],
          ['pipeline.max-parallelism', boxedInt(64)],
          ['execution.runtime-mode', enumConstant('org.apache.flink.api.common.RuntimeExecutionMode', 'STREAMING')],
        ],
        IDS,
      ),
    );
    expect(graph).toEqual({
      jobId: JOB_ID,
      configuration: {
        'security.delegation.job.team-store.bucket': 'team-a',
        'pipeline.max-parallelism': '64',
        'execution.runtime-mode': 'STREAMING',
      },
      skippedKeys: [],
      graphClass: 'org.apache.flink.runtime.jobgraph.JobGraph',
    });
  });

  it('stops at the job id: whatever follows (user classes, garbage) is never read', () => {
    // jobGraphStream ends in three bytes no reader could take; the read succeeds regardless.
    expect(readJobGraph(jobGraphStream([], IDS)).jobId).toBe(JOB_ID);
  });

  it('a value of a type it does not turn into text leaves its key out, named, never guessed', () => {
    const odd = Buffer.concat([u8(TC.OBJECT), classDesc('com.example.UserType', SC.SERIALIZABLE, [{ type: 'I', name: 'x' }]), i32(1)]);
    const graph = readJobGraph(
      jobGraphStream(
        [
          ['a', str('1')],
          ['b', odd],
        ],
        IDS,
      ),
    );
    expect(graph.configuration).toEqual({ a: '1' });
    expect(graph.skippedKeys).toEqual(['b']);
  });

  it('refuses what is not a job graph: another class, a string, no magic, another version', () => {
    const map = Buffer.concat([
      HEADER,
      u8(TC.OBJECT),
      classDesc('java.util.Date', SC.SERIALIZABLE, [{ type: 'J', name: 'fastTime' }]),
      i64(0n),
    ]);
    expect(unreadable(map)).toContain('java.util.Date, not a Flink JobGraph');
    expect(unreadable(Buffer.concat([HEADER, str('hello')]))).toContain('not a Flink JobGraph');
    expect(unreadable(Buffer.from('PK\x03\x04 a jar'))).toContain('not a Java serialisation stream');
    expect(unreadable(Buffer.from([0xac, 0xed, 0x00, 0x04, TC.NULL]))).toContain('unsupported stream version 4');
    expect(unreadable(Buffer.alloc(0))).toContain('not a Java serialisation stream');
  });

  it('refuses a proxy where the graph, or its configuration, should be', () => {
    const proxy = Buffer.concat([
      u8(TC.PROXYCLASSDESC),
      i32(1),
      utf('org.apache.flink.runtime.jobgraph.JobGraph'),
      u8(TC.ENDBLOCKDATA),
      classDesc('java.lang.reflect.Proxy', SC.SERIALIZABLE, []),
    ]);
    expect(unreadable(Buffer.concat([HEADER, u8(TC.OBJECT), proxy]))).toMatch(/java\.lang\.reflect\.Proxy|<proxy/);
    const graphDesc = classDesc('org.apache.flink.runtime.jobgraph.JobGraph', SC.SERIALIZABLE, [
      { type: 'L', name: 'jobConfiguration', className: str('Lorg/apache/flink/configuration/Configuration;') },
      { type: 'L', name: 'jobID', className: str('Lorg/apache/flink/api/common/JobID;') },
    ]);
    const inner = Buffer.concat([HEADER, u8(TC.OBJECT), graphDesc, u8(TC.OBJECT), proxy, u8(TC.NULL)]);
    expect(unreadable(inner)).toContain('jobConfiguration is a <proxy org.apache.flink.runtime.jobgraph.JobGraph>');
  });

  it('refuses enum and class-descriptor tricks', () => {
    // An enum constant whose class is not flagged an enum.
    expect(unreadable(jobGraphStream([['k', enumConstant('com.example.NotAnEnum', 'X', SC.SERIALIZABLE)]], IDS))).toContain(
      'which is not an enum',
    );
    // A plain object of an enum class.
    const enumObject = Buffer.concat([u8(TC.OBJECT), classDesc('com.example.E', SC.SERIALIZABLE | SC.ENUM, [])]);
    expect(unreadable(jobGraphStream([['k', enumObject]], IDS))).toContain('enum class com.example.E written as a plain object');
    // An enum constant whose name is not a string.
    const unnamed = Buffer.concat([u8(TC.ENUM), classDesc('com.example.E', SC.SERIALIZABLE | SC.ENUM, []), u8(TC.NULL)]);
    expect(unreadable(jobGraphStream([['k', unnamed]], IDS))).toContain('constant name of enum com.example.E is not a string');
    // A descriptor whose superclass is itself (a reference to its own handle, 0).
    const loop = Buffer.concat([
      HEADER,
      u8(TC.OBJECT),
      u8(TC.CLASSDESC),
      utf('a.Loop'),
      i64(1n),
      u8(SC.SERIALIZABLE),
      u16(0),
      u8(TC.ENDBLOCKDATA),
      ref(0),
    ]);
    expect(unreadable(loop)).toContain('superclass chain of a.Loop loops');
    // A reference to a string where a descriptor must be.
    expect(unreadable(Buffer.concat([HEADER, str('x'), u8(TC.OBJECT), ref(0)]))).toMatch(/not a Flink JobGraph/);
    expect(unreadable(Buffer.concat([HEADER, u8(TC.OBJECT), u8(TC.REFERENCE), i32(0x7e0000)]))).toContain('does not exist');
    const strAsDesc = Buffer.concat([HEADER, u8(TC.ARRAY), u8(TC.REFERENCE), i32(0x7e0000)]);
    expect(unreadable(strAsDesc)).toContain('does not exist');
    // Both Serializable and Externalizable; an unknown field type; old-protocol Externalizable data.
    expect(unreadable(Buffer.concat([HEADER, u8(TC.OBJECT), classDesc('a.Both', SC.SERIALIZABLE | SC.EXTERNALIZABLE, [])]))).toContain(
      'both Serializable and Externalizable',
    );
    expect(unreadable(Buffer.concat([HEADER, u8(TC.OBJECT), classDesc('a.Bad', SC.SERIALIZABLE, [{ type: 'Q', name: 'q' }])]))).toContain(
      "unknown type code 'Q'",
    );
    expect(unreadable(Buffer.concat([HEADER, u8(TC.OBJECT), classDesc('a.Ext', SC.EXTERNALIZABLE, [])]))).toContain('old protocol');
    // An object of an array class, an array of a non-array class.
    expect(unreadable(Buffer.concat([HEADER, u8(TC.OBJECT), classDesc('[B', SC.SERIALIZABLE, [])]))).toContain('array class [B');
    expect(unreadable(Buffer.concat([HEADER, u8(TC.ARRAY), classDesc('a.NotArray', SC.SERIALIZABLE, []), i32(0)]))).toContain(
      'not an array class',
    );
  });

  it('refuses unknown type codes, exceptions, resets inside objects and block data where a value belongs', () => {
    expect(unreadable(Buffer.concat([HEADER, u8(0x42)]))).toContain('unknown type code 0x42');
    expect(unreadable(jobGraphStream([['k', u8(0x6f)]], IDS))).toContain('unknown type code 0x6f');
    expect(unreadable(Buffer.concat([HEADER, u8(TC.EXCEPTION)]))).toContain('exception');
    expect(unreadable(jobGraphStream([['k', u8(TC.RESET)]], IDS))).toContain('reset inside an object');
    const graphDesc = classDesc('org.apache.flink.runtime.jobgraph.JobGraph', SC.SERIALIZABLE, [
      { type: 'L', name: 'jobConfiguration', className: str('Lorg/apache/flink/configuration/Configuration;') },
    ]);
    expect(unreadable(Buffer.concat([HEADER, u8(TC.OBJECT), graphDesc, block(Buffer.from('x'))]))).toContain(
      'block data where an object was expected',
    );
    expect(unreadable(Buffer.concat([HEADER, block(Buffer.from('x'))]))).toContain('starts with block data');
  });

  it('refuses lengths beyond the stream before allocating anything', () => {
    const huge = [
      Buffer.concat([HEADER, u8(TC.STRING), u16(0xffff), Buffer.from('short')]),
      Buffer.concat([HEADER, u8(TC.LONGSTRING), i64(0x7fffffffffffffffn)]),
      Buffer.concat([HEADER, u8(TC.ARRAY), classDesc('[B', SC.SERIALIZABLE, []), i32(0x7fffffff)]),
      Buffer.concat([HEADER, u8(TC.ARRAY), classDesc('[J', SC.SERIALIZABLE, []), i32(0x10000000)]),
      Buffer.concat([HEADER, u8(TC.ARRAY), classDesc('[Ljava.lang.Object;', SC.SERIALIZABLE, []), i32(0x7fffffff)]),
      Buffer.concat([HEADER, u8(TC.ARRAY), classDesc('[B', SC.SERIALIZABLE, []), i32(-1)]),
      Buffer.concat([HEADER, u8(TC.OBJECT), u8(TC.CLASSDESC), utf('a.Many'), i64(1n), u8(SC.SERIALIZABLE), u16(0xffff)]),
      Buffer.concat([HEADER, u8(TC.OBJECT), u8(TC.PROXYCLASSDESC), i32(0x7fffffff)]),
      jobGraphStream([['k', Buffer.concat([u8(TC.BLOCKDATALONG), i32(0x7fffffff)])]], IDS),
    ];
    for (const bytes of huge) expect(unreadable(bytes)).toMatch(/needs \d+ bytes|negative length|string length out of range/);
  });

  it('bounds nesting and the number of objects', () => {
    // 10 000 nested Object[] arrays: the depth limit ends it, without a stack overflow.
    const open = Buffer.concat([u8(TC.ARRAY), classDesc('[Ljava.lang.Object;', SC.SERIALIZABLE, []), i32(1)]);
    // Handle 0 is the array class's descriptor, which every level refers to.
    const nested = Buffer.concat([
      HEADER,
      open,
      ...Array.from({ length: 10_000 }, () => Buffer.concat([u8(TC.ARRAY), ref(0), i32(1)])),
      u8(TC.NULL),
    ]);
    expect(unreadable(nested)).toContain('nesting deeper than 64');
    const many = Buffer.concat([
      HEADER,
      u8(TC.ARRAY),
      classDesc('[Ljava.lang.Object;', SC.SERIALIZABLE, []),
      i32(3_000),
      ...Array.from({ length: 3_000 }, () => Buffer.concat([u8(TC.STRING), u16(0)])),
    ]);
    expect(() => readJobGraph(many, { maxHandles: 2_000 })).toThrow('more than 2000 objects');
  });

  it('every truncation and thousands of seeded byte flips of a good graph end in a result or a 400', () => {
    const good = jobGraphStream(
      [
        ['a', str('x')],
        ['b', boxedInt(7)],
        ['c', enumConstant('e.E', 'V')],
      ],
      IDS,
    );
    for (let n = 0; n < good.length - 3; n++) unreadable(good.subarray(0, n));
    let seed = 42;
    const random = () => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed;
    };
    for (let i = 0; i < 5000; i++) {
      const bytes = Buffer.from(good);
      for (let k = 0; k < 1 + (random() % 3); k++) bytes[4 + (random() % (bytes.length - 4))] = random() & 0xff;
      try {
        readJobGraph(bytes);
      } catch (err) {
        expect((err as { code?: string }).code).toBe('JOB_GRAPH_UNREADABLE');
      }
    }
  });

  it('decodes modified UTF-8 (an encoded NUL, a supplementary character as a surrogate pair)', () => {
    const nulAndClef = Buffer.from([0x61, 0xc0, 0x80, 0xed, 0xa0, 0xb4, 0xed, 0xb4, 0x9e]);
    const bytes = Buffer.concat([HEADER, u8(TC.STRING), u16(nulAndClef.length), nulAndClef]);
    expect(readFirstObject(bytes)).toBe('a\u0000\u{1d11e}');
  });
});
