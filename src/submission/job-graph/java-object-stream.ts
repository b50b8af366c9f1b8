/**
 * A bounded reader of Java's Object Serialization Stream (protocol version 2, the format
 * `ObjectOutputStream` writes), after the grammar of the Java Object Serialization Specification,
 * chapter 6. It walks class descriptors and field values generically and builds plain data: it
 * never loads, resolves or runs anything a stream names (no class is looked up, no `readObject`,
 * `readResolve` or `readExternal` exists here), so a stream that names user classes is only text.
 *
 * One assumption the format cannot avoid: a class with its own `writeObject` (flag SC_WRITE_METHOD)
 * is read as `defaultWriteObject()` followed by its extra data up to TC_ENDBLOCKDATA, which is what
 * `java.util.HashMap`, `ArrayList`, `java.net.URL` and nearly every JDK and Flink class do. A class
 * that writes something else makes the stream unreadable here (an error, never a wrong value).
 *
 * Every length is checked against the bytes left before anything is allocated, and nesting, handle
 * count and descriptor chains are bounded, so a hostile stream ends in a `JavaStreamError`.
 */

const STREAM_MAGIC = 0xaced;
const STREAM_VERSION = 5;
const BASE_WIRE_HANDLE = 0x7e0000;

const TC_NULL = 0x70;
const TC_REFERENCE = 0x71;
const TC_CLASSDESC = 0x72;
const TC_OBJECT = 0x73;
const TC_STRING = 0x74;
const TC_ARRAY = 0x75;
const TC_CLASS = 0x76;
const TC_BLOCKDATA = 0x77;
const TC_ENDBLOCKDATA = 0x78;
const TC_RESET = 0x79;
const TC_BLOCKDATALONG = 0x7a;
const TC_EXCEPTION = 0x7b;
const TC_LONGSTRING = 0x7c;
const TC_PROXYCLASSDESC = 0x7d;
const TC_ENUM = 0x7e;

const SC_WRITE_METHOD = 0x01;
const SC_SERIALIZABLE = 0x02;
const SC_EXTERNALIZABLE = 0x04;
const SC_BLOCK_DATA = 0x08;
const SC_ENUM = 0x10;

const PRIMITIVE_SIZES: Readonly<Record<string, number>> = { B: 1, C: 2, D: 8, F: 4, I: 4, J: 8, S: 2, Z: 1 };

export interface JavaStreamLimits {
  /** Nesting of objects, arrays and annotations. */
  maxDepth: number;
  /** Handles (objects, strings, descriptors, ...) the stream may create. */
  maxHandles: number;
  /** Classes in one descriptor's superclass chain. */
  maxClassChain: number;
}

export const DEFAULT_JAVA_STREAM_LIMITS: JavaStreamLimits = { maxDepth: 64, maxHandles: 200_000, maxClassChain: 32 };

/** The stream is not one this reader can read (malformed, hostile, or outside what it supports). */
export class JavaStreamError extends Error {
  readonly code = 'JAVA_STREAM_UNREADABLE';
  constructor(
    message: string,
    readonly offset: number,
  ) {
    super(`${message} (at byte ${offset})`);
  }
}

export interface FieldDesc {
  /** The type code: one of `BCDFIJSZ` for a primitive, `L` for an object, `[` for an array. */
  type: string;
  name: string;
  /** The field's type in JVM notation (`Ljava/lang/String;`), object fields only. */
  className?: string;
}

export interface ClassDesc {
  kind: 'classDesc';
  name: string;
  flags: number;
  fields: FieldDesc[];
  superDesc: ClassDesc | null;
  /** A dynamic proxy's interfaces (TC_PROXYCLASSDESC). */
  proxyInterfaces?: string[];
}

/** One class's part of an object: its declared fields and what its `writeObject` wrote after them. */
export interface ClassData {
  className: string;
  values: Map<string, JavaValue>;
  annotations: JavaValue[];
}

export interface JavaObject {
  kind: 'object';
  className: string;
  /** The superclass first, as the stream holds them. */
  classes: ClassData[];
}

export interface JavaArray {
  kind: 'array';
  className: string;
  /** Primitive arrays' raw big-endian bytes; object arrays' elements. */
  bytes?: Buffer;
  elements?: JavaValue[];
  length: number;
}

export interface JavaEnum {
  kind: 'enum';
  className: string;
  constant: string;
}

export interface JavaClass {
  kind: 'class';
  desc: ClassDesc;
}

export interface BlockData {
  kind: 'block';
  bytes: Buffer;
}

export type JavaValue = null | string | number | bigint | boolean | JavaObject | JavaArray | JavaEnum | JavaClass | ClassDesc | BlockData;

/**
 * Called after each field of an object at `depth` (0: the stream's first object) is read; returning
 * true ends the read there (`readFirstObject` then returns what was read so far). A caller that needs
 * a few leading fields of a large object stops before the parts it has no use for.
 */
export type FieldVisitor = (className: string, field: string, value: JavaValue, depth: number) => boolean;

class StopRead {
  constructor(readonly value: JavaObject) {}
}

/** The first object of a serialised stream (what one `ObjectOutputStream.writeObject` call wrote). */
export function readFirstObject(bytes: Buffer, opts: { limits?: Partial<JavaStreamLimits>; visit?: FieldVisitor } = {}): JavaValue {
  return new JavaObjectStreamReader(bytes, { ...DEFAULT_JAVA_STREAM_LIMITS, ...opts.limits }, opts.visit).readFirst();
}

class JavaObjectStreamReader {
  private pos = 0;
  private depth = 0;
  private handles: JavaValue[] = [];
  private handleCount = 0;
  private top?: JavaObject;

  constructor(
    private readonly buf: Buffer,
    private readonly limits: JavaStreamLimits,
    private readonly visit?: FieldVisitor,
  ) {}

  readFirst(): JavaValue {
    if (this.buf.length < 4 || this.buf.readUInt16BE(0) !== STREAM_MAGIC)
      throw new JavaStreamError('not a Java serialisation stream (no 0xACED magic)', 0);
    if (this.buf.readUInt16BE(2) !== STREAM_VERSION) throw new JavaStreamError(`unsupported stream version ${this.buf.readUInt16BE(2)}`, 2);
    this.pos = 4;
    try {
      for (;;) {
        const tc = this.peekByte();
        if (tc === TC_RESET) {
          this.pos++;
          this.reset();
          continue;
        }
        if (tc === TC_BLOCKDATA || tc === TC_BLOCKDATALONG) throw this.fail('the stream starts with block data, not an object');
        return this.readContent();
      }
    } catch (err) {
      if (err instanceof StopRead) return err.value;
      if (err instanceof JavaStreamError) throw err;
      if (err instanceof RangeError) throw new JavaStreamError(`unexpected end of the stream (${err.message})`, this.pos);
      throw err;
    }
  }

  private fail(message: string): JavaStreamError {
    return new JavaStreamError(message, this.pos);
  }

  private remaining(): number {
    return this.buf.length - this.pos;
  }

  private need(n: number, what: string): void {
    if (n < 0 || n > this.remaining()) throw this.fail(`${what} needs ${n} bytes, ${this.remaining()} are left`);
  }

  private peekByte(): number {
    this.need(1, 'a type code');
    return this.buf[this.pos]!;
  }

  private u8(): number {
    this.need(1, 'a byte');
    return this.buf[this.pos++]!;
  }

  private u16(): number {
    this.need(2, 'a short');
    const v = this.buf.readUInt16BE(this.pos);
    this.pos += 2;
    return v;
  }

  private i32(): number {
    this.need(4, 'an int');
    const v = this.buf.readInt32BE(this.pos);
    this.pos += 4;
    return v;
  }

  private i64(): bigint {
    this.need(8, 'a long');
    const v = this.buf.readBigInt64BE(this.pos);
    this.pos += 8;
    return v;
  }

  private take(n: number, what: string): Buffer {
    this.need(n, what);
    const out = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }

  private utf(long = false): string {
    const len = long ? Number(this.i64()) : this.u16();
    if (!Number.isSafeInteger(len)) throw this.fail('a string length out of range');
    return decodeModifiedUtf8(this.take(len, 'a string'), this.pos - len);
  }

  private reset(): void {
    if (this.depth > 0) throw this.fail(`a reset inside an object (nesting ${this.depth})`);
    this.handles = [];
  }

  private newHandle(value: JavaValue): number {
    if (++this.handleCount > this.limits.maxHandles) throw this.fail(`more than ${this.limits.maxHandles} objects`);
    this.handles.push(value);
    return this.handles.length - 1;
  }

  private setHandle(handle: number, value: JavaValue): void {
    this.handles[handle] = value;
  }

  private reference(): JavaValue {
    const wire = this.i32();
    const index = wire - BASE_WIRE_HANDLE;
    if (index < 0 || index >= this.handles.length)
      throw this.fail(`a reference to handle 0x${(wire >>> 0).toString(16)}, which does not exist`);
    return this.handles[index]!;
  }

  private enter(): void {
    if (++this.depth > this.limits.maxDepth) throw this.fail(`nesting deeper than ${this.limits.maxDepth}`);
  }

  private leave(): void {
    this.depth--;
  }

  /** `content`: an object or block data. */
  private readContent(): JavaValue {
    const tc = this.u8();
    switch (tc) {
      case TC_NULL:
        return null;
      case TC_REFERENCE:
        return this.reference();
      case TC_CLASSDESC:
        return this.classDescBody();
      case TC_PROXYCLASSDESC:
        return this.proxyDescBody();
      case TC_OBJECT:
        return this.objectBody();
      case TC_STRING: {
        const s = this.utf();
        this.newHandle(s);
        return s;
      }
      case TC_LONGSTRING: {
        const s = this.utf(true);
        this.newHandle(s);
        return s;
      }
      case TC_ARRAY:
        return this.arrayBody();
      case TC_CLASS: {
        const desc = this.classDesc();
        if (!desc) throw this.fail('a class object without a descriptor');
        const value: JavaClass = { kind: 'class', desc };
        this.newHandle(value);
        return value;
      }
      case TC_ENUM:
        return this.enumBody();
      case TC_BLOCKDATA:
        return { kind: 'block', bytes: this.take(this.u8(), 'block data') };
      case TC_BLOCKDATALONG: {
        const len = this.i32();
        return { kind: 'block', bytes: this.take(len, 'block data') };
      }
      case TC_RESET:
        this.reset();
        return this.readContent();
      case TC_EXCEPTION:
        throw this.fail('the stream records an exception thrown while it was written');
      case TC_ENDBLOCKDATA:
        throw this.fail('an end of block data where a value was expected');
      default:
        throw this.fail(`unknown type code 0x${tc.toString(16)}`);
    }
  }

  /** A value that must be an object (not block data). */
  private readObjectValue(): JavaValue {
    const v = this.readContent();
    if (v !== null && typeof v === 'object' && v.kind === 'block') throw this.fail('block data where an object was expected');
    return v;
  }

  /** `classDesc`: a new descriptor, a reference to one, or null. */
  private classDesc(): ClassDesc | null {
    const tc = this.u8();
    let v: JavaValue;
    if (tc === TC_NULL) return null;
    if (tc === TC_CLASSDESC) v = this.classDescBody();
    else if (tc === TC_PROXYCLASSDESC) v = this.proxyDescBody();
    else if (tc === TC_REFERENCE) v = this.reference();
    else throw this.fail(`type code 0x${tc.toString(16)} where a class descriptor was expected`);
    if (v === null || typeof v !== 'object' || v.kind !== 'classDesc')
      throw this.fail('a reference to something that is not a class descriptor, where one was expected');
    return v;
  }

  private classDescBody(): ClassDesc {
    const name = this.utf();
    this.take(8, 'a serialVersionUID');
    const desc: ClassDesc = { kind: 'classDesc', name, flags: 0, fields: [], superDesc: null };
    this.newHandle(desc);
    desc.flags = this.u8();
    if ((desc.flags & SC_SERIALIZABLE) !== 0 && (desc.flags & SC_EXTERNALIZABLE) !== 0)
      throw this.fail(`class ${name} is flagged both Serializable and Externalizable`);
    const count = this.u16();
    this.need(count * 3, `${count} field descriptors`);
    for (let i = 0; i < count; i++) {
      const type = String.fromCharCode(this.u8());
      const fieldName = this.utf();
      if (type === 'L' || type === '[') {
        const className = this.readObjectValue();
        if (typeof className !== 'string') throw this.fail(`the type of field ${name}.${fieldName} is not a string`);
        desc.fields.push({ type, name: fieldName, className });
      } else if (PRIMITIVE_SIZES[type] !== undefined) {
        desc.fields.push({ type, name: fieldName });
      } else {
        throw this.fail(`field ${name}.${fieldName} has an unknown type code '${type}'`);
      }
    }
    this.annotations();
    desc.superDesc = this.classDesc();
    this.chainOf(desc);
    return desc;
  }

  private proxyDescBody(): ClassDesc {
    const desc: ClassDesc = {
      kind: 'classDesc',
      name: '<proxy>',
      flags: SC_SERIALIZABLE,
      fields: [],
      superDesc: null,
      proxyInterfaces: [],
    };
    this.newHandle(desc);
    const count = this.i32();
    this.need(count * 2, `${count} proxy interface names`);
    for (let i = 0; i < count; i++) desc.proxyInterfaces!.push(this.utf());
    desc.name = `<proxy ${desc.proxyInterfaces!.join(',')}>`;
    this.annotations();
    desc.superDesc = this.classDesc();
    this.chainOf(desc);
    return desc;
  }

  /** The descriptor and its superclasses, most derived first; a cycle or an overlong chain fails. */
  private chainOf(desc: ClassDesc): ClassDesc[] {
    const chain: ClassDesc[] = [];
    for (let d: ClassDesc | null = desc; d; d = d.superDesc) {
      if (chain.includes(d)) throw this.fail(`the superclass chain of ${desc.name} loops`);
      if (chain.length >= this.limits.maxClassChain)
        throw this.fail(`the superclass chain of ${desc.name} is longer than ${this.limits.maxClassChain}`);
      chain.push(d);
    }
    return chain;
  }

  /** `classAnnotation` / `objectAnnotation`: contents up to TC_ENDBLOCKDATA. */
  private annotations(): JavaValue[] {
    const out: JavaValue[] = [];
    this.enter();
    for (;;) {
      if (this.peekByte() === TC_ENDBLOCKDATA) {
        this.pos++;
        break;
      }
      out.push(this.readContent());
    }
    this.leave();
    return out;
  }

  private objectBody(): JavaObject {
    const desc = this.classDesc();
    if (!desc) throw this.fail('an object without a class descriptor');
    if (desc.name.startsWith('[')) throw this.fail(`an object of array class ${desc.name}`);
    if ((desc.flags & SC_ENUM) !== 0) throw this.fail(`an object of enum class ${desc.name} written as a plain object`);
    const obj: JavaObject = { kind: 'object', className: desc.name, classes: [] };
    const handle = this.newHandle(obj);
    const isTop = this.top === undefined;
    if (isTop) this.top = obj;
    const depth = this.depth;
    this.enter();
    for (const d of this.chainOf(desc).reverse()) {
      const data: ClassData = { className: d.name, values: new Map(), annotations: [] };
      obj.classes.push(data);
      if ((d.flags & SC_EXTERNALIZABLE) !== 0) {
        // Protocol 1 externalizable data has no framing: only the class itself could read it.
        if ((d.flags & SC_BLOCK_DATA) === 0)
          throw this.fail(`class ${d.name} is Externalizable in the old protocol, which only the class can read`);
        data.annotations = this.annotations();
        continue;
      }
      if ((d.flags & SC_SERIALIZABLE) === 0) throw this.fail(`class ${d.name} is neither Serializable nor Externalizable`);
      this.fieldValues(d, data, depth);
      if ((d.flags & SC_WRITE_METHOD) !== 0) data.annotations = this.annotations();
    }
    this.leave();
    this.setHandle(handle, obj);
    return obj;
  }

  private fieldValues(d: ClassDesc, data: ClassData, depth: number): void {
    for (const f of d.fields) {
      let v: JavaValue;
      switch (f.type) {
        case 'B':
          v = this.take(1, 'a byte').readInt8(0);
          break;
        case 'C':
          v = String.fromCharCode(this.u16());
          break;
        case 'D':
          v = this.take(8, 'a double').readDoubleBE(0);
          break;
        case 'F':
          v = this.take(4, 'a float').readFloatBE(0);
          break;
        case 'I':
          v = this.i32();
          break;
        case 'J':
          v = this.i64();
          break;
        case 'S':
          v = this.take(2, 'a short').readInt16BE(0);
          break;
        case 'Z':
          v = this.u8() !== 0;
          break;
        default:
          v = this.readObjectValue();
      }
      data.values.set(f.name, v);
      if (this.visit?.(d.name, f.name, v, depth) && this.top) throw new StopRead(this.top);
    }
  }

  private arrayBody(): JavaArray {
    const desc = this.classDesc();
    if (!desc?.name.startsWith('[') || desc.name.length < 2)
      throw this.fail(`an array whose class ${desc?.name ?? 'null'} is not an array class`);
    const arr: JavaArray = { kind: 'array', className: desc.name, length: 0 };
    const handle = this.newHandle(arr);
    const length = this.i32();
    if (length < 0) throw this.fail(`an array of negative length ${length}`);
    const element = desc.name[1]!;
    arr.length = length;
    const size = PRIMITIVE_SIZES[element];
    if (size !== undefined) {
      arr.bytes = this.take(length * size, `an array of ${length} ${element}`);
    } else if (element === 'L' || element === '[') {
      // Every element takes at least one byte: a length beyond what is left is a lie.
      this.need(length, `an array of ${length} objects`);
      arr.elements = [];
      this.enter();
      for (let i = 0; i < length; i++) arr.elements.push(this.readObjectValue());
      this.leave();
    } else {
      throw this.fail(`array class ${desc.name} has an unknown element type`);
    }
    this.setHandle(handle, arr);
    return arr;
  }

  private enumBody(): JavaEnum {
    const desc = this.classDesc();
    if (!desc) throw this.fail('an enum constant without a class descriptor');
    // The constant's class, or (a constant with a body) its anonymous subclass whose superclass is the enum.
    const enumDesc = (desc.flags & SC_ENUM) !== 0 ? desc : undefined;
    if (!enumDesc) throw this.fail(`an enum constant of class ${desc.name}, which is not an enum`);
    const value: JavaEnum = { kind: 'enum', className: enumDesc.name, constant: '' };
    const handle = this.newHandle(value);
    const name = this.readObjectValue();
    if (typeof name !== 'string') throw this.fail(`the constant name of enum ${enumDesc.name} is not a string`);
    value.constant = name;
    this.setHandle(handle, value);
    return value;
  }
}

/** Java's modified UTF-8 (`DataInput.readUTF`): NUL as two bytes, supplementary characters as surrogate pairs. */
export function decodeModifiedUtf8(bytes: Buffer, offset = 0): string {
  const units: number[] = [];
  let out = '';
  for (let i = 0; i < bytes.length; ) {
    const a = bytes[i]!;
    if (a < 0x80) {
      units.push(a);
      i += 1;
    } else if ((a & 0xe0) === 0xc0) {
      const b = bytes[i + 1];
      if (b === undefined || (b & 0xc0) !== 0x80) throw new JavaStreamError('a malformed modified UTF-8 string', offset + i);
      units.push(((a & 0x1f) << 6) | (b & 0x3f));
      i += 2;
    } else if ((a & 0xf0) === 0xe0) {
      const b = bytes[i + 1];
      const c = bytes[i + 2];
      if (b === undefined || c === undefined || (b & 0xc0) !== 0x80 || (c & 0xc0) !== 0x80)
        throw new JavaStreamError('a malformed modified UTF-8 string', offset + i);
      units.push(((a & 0x0f) << 12) | ((b & 0x3f) << 6) | (c & 0x3f));
      i += 3;
    } else {
      throw new JavaStreamError('a malformed modified UTF-8 string', offset + i);
    }
    if (units.length >= 4096) out += String.fromCharCode(...units.splice(0));
  }
  return out + String.fromCharCode(...units);
}
