/**
 * A fast path for the plain subset of YAML that topology files are written in: block mappings with
 * simple keys, block sequences of scalars, single-line flow collections, plain and quoted scalars
 * without escapes, and comments. It gives exactly the value js-yaml gives for such a text (a property
 * test holds it to that), in a fraction of the time, and gives up (returns undefined) on anything
 * else: anchors, aliases, tags, merge keys, block scalars, multi-line scalars or flow collections,
 * escapes, tabs, CR, control or unusual characters, document markers, duplicate keys, odd
 * indentation. The caller then parses the text with js-yaml, which gives the value or the error.
 *
 * Plain scalars are resolved by the same functions as js-yaml's schema uses (yaml-scalars.ts), so
 * `yes` stays text and `0x1F` is 31 on both paths.
 */
import type { ComponentLines, ComponentReuse, ComponentsRead } from './component-reuse.js';
import { resolvePlainScalar } from './yaml-scalars.js';

/** Thrown (never escapes) when the text leaves the subset. */
const giveUp: unique symbol = Symbol('leave the fast path');

/**
 * Characters that send a text to js-yaml wherever they appear: tab, CR, other controls, NEL, line and
 * paragraph separators, BOM, non-characters, and surrogates that are not part of a pair.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point
const unusualCharacter = /[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff]/;
const loneSurrogate = /[\ud800-\udbff](?![\udc00-\udfff])|(?:[^\ud800-\udbff]|^)[\udc00-\udfff]/;
const surrogate = /[\ud800-\udfff]/;

/** Deeper than this, js-yaml's own depth limit could apply; leave such texts to it. */
const maxDepth = 40;

/**
 * The value of a text in the supported subset, or undefined when js-yaml must parse it. With `reuse`,
 * an entry of the top-level `components` written in exactly the lines the text loaded before wrote it
 * takes that text's value, unread; `read` then says what each entry's lines were and which were taken.
 */
export function parseFastYaml(
  text: string,
  reuse?: Pick<ComponentReuse, 'lines'>,
): { value: unknown; read?: ComponentsRead } | undefined {
  if (unusualCharacter.test(text) || (surrogate.test(text) && loneSurrogate.test(text))) return undefined;
  return new FastYamlReader(text, reuse).read();
}

/**
 * One parse of one text: all its state lives here, so parses never share anything (no module state
 * to reset, nothing of a text kept alive after its parse, and re-entrant). Each method reads from the
 * current position and returns the position after what it read; a value read inline is left in
 * `node` rather than returned with the position, so that the hot path allocates no pairs.
 */
class FastYamlReader {
  private readonly src: string;
  private readonly end: number;
  /** Start of the current content line and its indentation (-1 at the end of the text). */
  private lineStart = 0;
  private indent = 0;
  /** Result of the last `inlineValue`/`flowNode` call. */
  private node: unknown = null;
  /**
   * Plain scalars repeat (keys above all, and values such as `info` or `/healthz`): a small table
   * indexed by a hash of the characters (computed while scanning) returns the text and value of an
   * earlier equal scalar without slicing or resolving it again.
   */
  private readonly cacheText: string[] = new Array<string>(cacheSize).fill('');
  private readonly cacheValue: unknown[] = new Array<unknown>(cacheSize).fill(null);
  /** Only with a reuse: the components loaded before, and what this parse reads of `components`. */
  private readonly reuse: Pick<ComponentReuse, 'lines'> | undefined;
  private readonly components: { lines: Map<string, ComponentLines>; reused: Set<string> } | undefined;

  constructor(text: string, reuse: Pick<ComponentReuse, 'lines'> | undefined) {
    this.src = text;
    this.end = text.length;
    this.reuse = reuse;
    this.components = reuse ? { lines: new Map(), reused: new Set() } : undefined;
  }

  read(): { value: unknown; read?: ComponentsRead } | undefined {
    try {
      this.nextContentLine();
      if (this.indent !== 0) return undefined; // empty, or an indented top level
      const root = this.blockMapping(0, 1, false);
      if (this.lineStart < this.end) return undefined;
      return this.components ? { value: root, read: this.components } : { value: root };
    } catch (error) {
      if (error === giveUp) return undefined;
      throw error;
    }
  }

  /**
   * Moves `lineStart` to the next line with content (skipping blank and comment-only lines) and sets
   * `indent`; at the end of the text, `lineStart` is `end` and `indent` is -1.
   */
  private nextContentLine(): void {
    let p = this.lineStart;
    while (p < this.end) {
      let q = p;
      while (this.src.charCodeAt(q) === 32) q++;
      const c = this.src.charCodeAt(q);
      if (q >= this.end) break;
      if (c === 10) {
        p = q + 1;
        continue;
      }
      if (c === 35 /* # */) {
        const nl = this.src.indexOf('\n', q);
        if (nl < 0) break;
        p = nl + 1;
        continue;
      }
      this.lineStart = p;
      this.indent = q - p;
      return;
    }
    this.lineStart = this.end;
    this.indent = -1;
  }

  /** Position after the end of the line containing `p` (after its newline, or `end`). */
  private lineEndAfter(p: number): number {
    const nl = this.src.indexOf('\n', p);
    return nl < 0 ? this.end : nl + 1;
  }

  /** Checks that from `p` the line holds only spaces and maybe a comment; moves to the next content line. */
  private finishLine(p: number): void {
    let q = p;
    while (this.src.charCodeAt(q) === 32) q++;
    const c = this.src.charCodeAt(q);
    if (q < this.end && c !== 10) {
      if (c !== 35 || q === p) fail(); // a comment needs a space before it
    }
    this.lineStart = this.lineEndAfter(q);
    this.nextContentLine();
  }

  /**
   * A block mapping whose keys are at indentation `n`; the current line is its first entry.
   * `components`: this is the top-level `components` of a parse with a reuse.
   */
  private blockMapping(n: number, depth: number, components: boolean): Record<string, unknown> {
    if (depth > maxDepth) fail();
    const out: Record<string, unknown> = {};
    for (;;) {
      const entryStart = this.lineStart;
      let p = this.lineStart + n;
      const c = this.src.charCodeAt(p);
      let key: string;
      if (c === 34 /* " */ || c === 39 /* ' */) {
        const close = this.quotedEnd(p);
        key = this.quotedValue(p, close);
        p = close + 1;
      } else {
        if (!isSimpleKeyStart(c)) fail();
        const start = p;
        let hash = c;
        for (let k = this.src.charCodeAt(++p); isSimpleKeyChar(k); k = this.src.charCodeAt(++p))
          hash = (hash * 31 + k) | 0;
        key = String(this.plainScalar(start, p, hash));
      }
      let known = components ? this.sameLines(key, entryStart) : undefined;
      let entry: unknown;
      if (known !== undefined) {
        // The same lines as in the text loaded before: the same value, unless the entry goes on past
        // them (a line added at its end): then it is read. What follows is judged below as after
        // any entry (a dash at this indentation gives up).
        this.lineStart = entryStart + known.text.length;
        this.nextContentLine();
        if (this.indent > n) {
          this.lineStart = entryStart;
          this.indent = n;
          known = undefined;
        }
      }
      if (known !== undefined) {
        entry = known.raw;
      } else {
        entry = this.entryValue(p, n, depth, depth === 1 && key === 'components' && this.reuse !== undefined);
      }
      if (components) this.readComponent(key, entryStart, entry, known);
      // js-yaml reports a duplicate key. No value here is undefined, so a plain read rules most keys
      // out before the own-property check (a key such as `constructor` reads an inherited value).
      if (out[key] !== undefined && Object.hasOwn(out, key)) fail();
      setProperty(out, key, entry);
      if (this.indent === n) {
        if (this.isSequenceEntry(this.lineStart + n)) fail();
        continue;
      }
      if (this.indent > n) fail();
      return out;
    }
  }

  /** The value of the entry whose key ends at `p`; `components`: it is the top-level `components`. */
  private entryValue(p: number, n: number, depth: number, components: boolean): unknown {
    if (this.src.charCodeAt(p) !== 58 /* : */) fail();
    p++;
    const after = this.src.charCodeAt(p);
    if (p < this.end && after !== 32 && after !== 10) fail();
    while (this.src.charCodeAt(p) === 32) p++;
    const v = this.src.charCodeAt(p);
    if (p >= this.end || v === 10 || (v === 35 && this.src.charCodeAt(p - 1) === 32)) {
      // Nothing on the line: a nested block, an indentless sequence, or null.
      this.lineStart = this.lineEndAfter(p);
      this.nextContentLine();
      if (this.indent > n) {
        return this.isSequenceEntry(this.lineStart + this.indent)
          ? this.blockSequence(this.indent, depth + 1)
          : this.blockMapping(this.indent, depth + 1, components);
      }
      if (this.indent === n && this.isSequenceEntry(this.lineStart + n))
        return this.blockSequence(n, depth + 1);
      return null;
    }
    p = this.inlineValue(p, depth + 1);
    const entry = this.node;
    this.finishLine(p);
    return entry;
  }

  /** The component `name` of the text loaded before, when this text writes it in the same lines from `start`. */
  private sameLines(name: string, start: number): ComponentLines | undefined {
    const known = this.reuse?.lines(name);
    if (known === undefined) return undefined;
    // Equality of two slices, not startsWith: V8 compares a slice (what `known.text` is) that way
    // several times faster.
    return this.src.slice(start, start + known.text.length) === known.text ? known : undefined;
  }

  /**
   * Notes the lines of a component just read (from `start` to the next content line) and its value.
   * Only lines that end with a newline: so text taken over always ends at the start of a line here.
   */
  private readComponent(name: string, start: number, raw: unknown, known: ComponentLines | undefined): void {
    const read = this.components as NonNullable<typeof this.components>;
    if (known !== undefined) {
      read.lines.set(name, known);
      read.reused.add(name);
    } else if (this.lineStart > start && this.src.charCodeAt(this.lineStart - 1) === 10) {
      read.lines.set(name, { text: this.src.slice(start, this.lineStart), raw });
    }
  }

  private isSequenceEntry(p: number): boolean {
    if (this.src.charCodeAt(p) !== 45 /* - */) return false;
    const next = this.src.charCodeAt(p + 1);
    return p + 1 >= this.end || next === 32 || next === 10;
  }

  /** A block sequence of scalars and flow collections whose dashes are at indentation `n`. */
  private blockSequence(n: number, depth: number): unknown[] {
    if (depth > maxDepth) fail();
    const out: unknown[] = [];
    for (;;) {
      let p = this.lineStart + n + 1;
      if (this.src.charCodeAt(p) !== 32) fail(); // `-` alone: a nested block or an empty entry
      while (this.src.charCodeAt(p) === 32) p++;
      const c = this.src.charCodeAt(p);
      if (p >= this.end || c === 10 || c === 35) fail();
      p = this.inlineValue(p, depth + 1);
      this.finishLine(p);
      out.push(this.node);
      if (this.indent === n && this.isSequenceEntry(this.lineStart + n)) continue;
      if (this.indent > n) fail();
      return out;
    }
  }

  /** A scalar or flow collection that fits on the rest of the line; returns the position after it. */
  private inlineValue(p: number, depth: number): number {
    const c = this.src.charCodeAt(p);
    if (c === 91 /* [ */ || c === 123 /* { */) return this.flowCollection(p, depth);
    if (c === 34 || c === 39) {
      const close = this.quotedEnd(p);
      this.node = this.quotedValue(p, close);
      return close + 1;
    }
    if (!isPlainStart(c, this.src.charCodeAt(p + 1))) fail();
    // A plain scalar runs to the end of the line or to ` #`; `: ` inside it would be a mapping.
    const start = p;
    let last = p; // after the last non-space character
    let hash = 0;
    for (;;) {
      const ch = this.src.charCodeAt(p);
      if (p >= this.end || ch === 10) break;
      if (ch === 32) {
        if (this.src.charCodeAt(p + 1) === 35) break;
      } else {
        if (ch === 58 /* : */) {
          const next = this.src.charCodeAt(p + 1);
          if (p + 1 >= this.end || next === 32 || next === 10) fail();
        } else if (ch === 91 || ch === 93 || ch === 123 || ch === 125) {
          fail();
        }
        hash = (hash * 31 + ch) | 0;
        last = p + 1;
      }
      p++;
    }
    this.node = this.plainScalar(start, last, hash);
    return last;
  }

  /** Index of the closing quote of a quoted scalar starting at `p`, on the same line, without escapes. */
  private quotedEnd(p: number): number {
    const quote = this.src.charCodeAt(p);
    let q = p + 1;
    for (;;) {
      const ch = this.src.charCodeAt(q);
      if (q >= this.end || ch === 10 || ch === 92 /* \ */) fail();
      if (ch === quote) {
        if (quote === 39 && this.src.charCodeAt(q + 1) === 39) {
          q += 2; // '' is a quote inside single quotes
          continue;
        }
        return q;
      }
      q++;
    }
  }

  private quotedValue(open: number, close: number): string {
    const text = this.src.slice(open + 1, close);
    return this.src.charCodeAt(open) === 39 && text.includes("''") ? text.replaceAll("''", "'") : text;
  }

  /** A single-line flow sequence or mapping starting at `p`; sets `node`, returns the position after it. */
  private flowCollection(p: number, depth: number): number {
    if (depth > maxDepth) fail();
    const isMap = this.src.charCodeAt(p) === 123;
    const close = isMap ? 125 : 93;
    const seq: unknown[] | undefined = isMap ? undefined : [];
    const map: Record<string, unknown> | undefined = isMap ? {} : undefined;
    p = this.skipSpaces(p + 1);
    if (this.src.charCodeAt(p) === close) {
      this.node = isMap ? map : seq;
      return p + 1;
    }
    for (;;) {
      if (isMap) {
        let key: string;
        const c = this.src.charCodeAt(p);
        if (c === 34 || c === 39) {
          const q = this.quotedEnd(p);
          key = this.quotedValue(p, q);
          p = q + 1;
        } else {
          p = this.flowPlain(p, true);
          key = String(this.node);
        }
        if (this.src.charCodeAt(p) !== 58 || this.src.charCodeAt(p + 1) !== 32) fail();
        p = this.skipSpaces(p + 2);
        p = this.flowNode(p, depth + 1);
        if (Object.hasOwn(map as object, key)) fail();
        setProperty(map as Record<string, unknown>, key, this.node);
      } else {
        p = this.flowNode(p, depth + 1);
        (seq as unknown[]).push(this.node);
      }
      p = this.skipSpaces(p);
      const c = this.src.charCodeAt(p);
      if (c === 44 /* , */) {
        p = this.skipSpaces(p + 1);
        const next = this.src.charCodeAt(p);
        if (next === close || next === 44) fail(); // a trailing or doubled comma
        continue;
      }
      if (c === close) {
        this.node = isMap ? map : seq;
        return p + 1;
      }
      fail();
    }
  }

  private skipSpaces(p: number): number {
    while (this.src.charCodeAt(p) === 32) p++;
    return p;
  }

  /** A node inside a flow collection: a nested collection, a quoted or a plain scalar. */
  private flowNode(p: number, depth: number): number {
    const c = this.src.charCodeAt(p);
    if (c === 91 || c === 123) return this.flowCollection(p, depth);
    if (c === 34 || c === 39) {
      const q = this.quotedEnd(p);
      this.node = this.quotedValue(p, q);
      // `"a": b` inside a sequence would be a pair
      const after = this.src.charCodeAt(this.skipSpaces(q + 1));
      if (after === 58) fail();
      return q + 1;
    }
    const q = this.flowPlain(p, false);
    if (this.src.charCodeAt(q) === 58) fail(); // a pair (or a key) where a value was expected
    return q;
  }

  /**
   * A plain scalar inside a flow collection: ends at `,`, `]`, `}` or at `:` followed by a space or an
   * indicator (then `node` is the text resolved, and the position is that of the `:`).
   */
  private flowPlain(p: number, isKey: boolean): number {
    const c = this.src.charCodeAt(p);
    if (!isPlainStart(c, this.src.charCodeAt(p + 1))) fail();
    const start = p;
    let last = p;
    let hash = 0;
    for (;;) {
      const ch = this.src.charCodeAt(p);
      if (p >= this.end || ch === 10) fail(); // a flow collection over several lines
      if (ch === 44 || ch === 93 || ch === 125) break;
      if (ch === 91 || ch === 123) fail();
      if (ch === 32) {
        if (this.src.charCodeAt(p + 1) === 35) fail(); // a comment inside a flow collection
      } else if (ch === 58) {
        const next = this.src.charCodeAt(p + 1);
        if (
          next === 32 ||
          next === 44 ||
          next === 93 ||
          next === 125 ||
          next === 91 ||
          next === 123 ||
          next === 10
        ) {
          if (!isKey || next !== 32) fail();
          break;
        }
        hash = (hash * 31 + ch) | 0;
        last = p + 1;
      } else {
        hash = (hash * 31 + ch) | 0;
        last = p + 1;
      }
      p++;
    }
    this.node = this.plainScalar(start, last, hash);
    return p;
  }

  /** `src.startsWith(known, start)`, as a loop: cheaper than the built-in for short texts. */
  private sameText(known: string, start: number): boolean {
    for (let i = 0; i < known.length; i++)
      if (known.charCodeAt(i) !== this.src.charCodeAt(start + i)) return false;
    return true;
  }

  private plainScalar(start: number, stop: number, hash: number): unknown {
    const i = hash & (cacheSize - 1);
    const known = this.cacheText[i] as string;
    if (known.length === stop - start && this.sameText(known, start)) return this.cacheValue[i];
    const text = this.src.slice(start, stop);
    if (text === '<<') fail(); // a merge key, or the value js-yaml's merge type gives it
    const v = resolvePlainScalar(text);
    this.cacheText[i] = text;
    this.cacheValue[i] = v;
    return v;
  }
}

function fail(): never {
  throw giveUp;
}

function isSimpleKeyStart(c: number): boolean {
  // letters, digits, _ $ /
  return (
    (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || (c >= 48 && c <= 57) || c === 95 || c === 36 || c === 47
  );
}

function isSimpleKeyChar(c: number): boolean {
  return isSimpleKeyStart(c) || c === 45 || c === 46; // and - .
}

/** Characters that cannot start a plain scalar; `-`, `?` and `:` only when a space follows. */
function isPlainStart(c: number, next: number): boolean {
  switch (c) {
    case 32:
    case 10:
    case 44: // ,
    case 91: // [
    case 93: // ]
    case 123: // {
    case 125: // }
    case 35: // #
    case 38: // &
    case 42: // *
    case 33: // !
    case 124: // |
    case 62: // >
    case 39: // '
    case 34: // "
    case 37: // %
    case 64: // @
    case 96: // `
      return false;
    case 45: // -
    case 63: // ?
    case 58: // :
      return !(
        next === 32 ||
        next === 10 ||
        next === 44 ||
        next === 91 ||
        next === 93 ||
        next === 123 ||
        next === 125 ||
        Number.isNaN(next)
      );
    default:
      return true;
  }
}

/** Slots of a reader's scalar cache (a power of two: the slot is the hash's low bits). */
const cacheSize = 4096;

function setProperty(record: Record<string, unknown>, key: string, v: unknown): void {
  if (key === '__proto__') {
    Object.defineProperty(record, key, { value: v, enumerable: true, writable: true, configurable: true });
  } else {
    record[key] = v;
  }
}
