/**
 * The chunked framing of a request body (RFC 9112 §7.1), read strictly, as Node's parser read it:
 * a chunk size of hex digits directly followed by CRLF or by extensions (`;name` or
 * `;name=value`, a token or a quoted string), CRLF line ends only, CRLF after each chunk's data,
 * and trailer lines that are well-formed header lines (read and dropped). Pure and incremental:
 * any split of the bytes over reads gives the same data and the same verdict.
 */
import { isTokenByte } from './request-head.js';

const CR = 0x0d;
const LF = 0x0a;

/** The most bytes of the size line with its extensions, and of the trailers. */
const maxChunkLineBytes = 4096;
const maxTrailerBytes = 8192;
/** Larger chunks are refused (llhttp's bound is 2^64; JavaScript counts exactly to 2^53). */
const maxChunkSize = 2 ** 48;

type State =
  | 'size'
  | 'extension'
  | 'size-lf'
  | 'data'
  | 'data-cr'
  | 'data-lf'
  | 'trailer-start'
  | 'trailer'
  | 'trailer-lf'
  | 'end-lf'
  | 'done';

/** What one read of chunked bytes gave: how many it used, whether the body ended, or its fault. */
export interface ChunkedRead {
  /** Bytes of the input taken (all of it, unless the body ended or failed before its end). */
  used: number;
  done: boolean;
  error: string | null;
}

export class ChunkedDecoder {
  private state: State = 'size';
  private size = 0;
  private sizeDigits = 0;
  private remaining = 0;
  private lineBytes = 0;
  private trailerBytes = 0;
  /** In an extension: 0 name, 1 after '=', 2 in a token value, 3 in a quoted string, 4 after an escape, 5 after a quoted string. */
  private extension = 0;
  private extensionLength = 0;

  get done(): boolean {
    return this.state === 'done';
  }

  /**
   * Reads `buffer[start, end)`; calls `data(buffer, from, to)` for each run of body bytes.
   */
  read(buffer: Buffer, start: number, end: number, data: (from: number, to: number) => void): ChunkedRead {
    let i = start;
    while (i < end) {
      const byte = buffer[i] as number;
      switch (this.state) {
        case 'size': {
          const digit = hexValue(byte);
          if (digit >= 0) {
            if (++this.sizeDigits > maxChunkLineBytes) return this.fail(i, 'a chunk size line too long');
            this.size = this.size * 16 + digit;
            if (this.size > maxChunkSize) return this.fail(i, 'a chunk size too large');
            i++;
            break;
          }
          if (this.sizeDigits === 0) return this.fail(i, 'a chunk size that is not hex');
          if (byte === CR) this.state = 'size-lf';
          else if (byte === 0x3b) {
            this.state = 'extension';
            this.extension = 0;
            this.extensionLength = 0;
          } else return this.fail(i, 'a byte after a chunk size that is neither CRLF nor an extension');
          this.lineBytes = Math.min(this.sizeDigits, 16) + 1;
          i++;
          break;
        }
        case 'extension': {
          if (++this.lineBytes > maxChunkLineBytes) return this.fail(i, 'a chunk extension too long');
          const problem = this.extensionByte(byte);
          if (problem) return this.fail(i, problem);
          i++;
          break;
        }
        case 'size-lf':
          if (byte !== LF) return this.fail(i, 'a CR not followed by LF in chunk framing');
          i++;
          if (this.size === 0) {
            this.state = 'trailer-start';
            break;
          }
          this.remaining = this.size;
          this.state = 'data';
          break;
        case 'data': {
          const take = Math.min(this.remaining, end - i);
          data(i, i + take);
          i += take;
          this.remaining -= take;
          if (this.remaining === 0) this.state = 'data-cr';
          break;
        }
        case 'data-cr':
          if (byte !== CR) return this.fail(i, 'no CRLF after the data of a chunk');
          this.state = 'data-lf';
          i++;
          break;
        case 'data-lf':
          if (byte !== LF) return this.fail(i, 'no CRLF after the data of a chunk');
          this.state = 'size';
          this.size = 0;
          this.sizeDigits = 0;
          i++;
          break;
        case 'trailer-start':
          // The empty line ends the body; anything else is a trailer field, which must be a token first.
          if (byte === CR) this.state = 'end-lf';
          else if (isTokenByte(byte)) this.state = 'trailer';
          else return this.fail(i, 'a malformed trailer line');
          this.lineBytes = 1;
          if (++this.trailerBytes > maxTrailerBytes) return this.fail(i, 'trailers too long');
          i++;
          break;
        case 'trailer':
          if (++this.trailerBytes > maxTrailerBytes) return this.fail(i, 'trailers too long');
          if (byte === CR) {
            // The line must have had its colon (checked as it went: see below).
            if (this.lineBytes >= 0) return this.fail(i, 'a trailer line without a colon');
            this.state = 'trailer-lf';
          } else if (this.lineBytes >= 0) {
            // In the name: token bytes up to the colon.
            if (byte === 0x3a) this.lineBytes = -1;
            else if (!isTokenByte(byte)) return this.fail(i, 'a malformed trailer name');
          } else if (byte !== 0x09 && (byte < 0x20 || byte === 0x7f))
            return this.fail(i, 'a control character in a trailer');
          i++;
          break;
        case 'trailer-lf':
          if (byte !== LF) return this.fail(i, 'a CR not followed by LF in the trailers');
          this.state = 'trailer-start';
          i++;
          break;
        case 'end-lf':
          if (byte !== LF) return this.fail(i, 'a CR not followed by LF at the end of the body');
          this.state = 'done';
          return { used: i + 1 - start, done: true, error: null };
        case 'done':
          return { used: i - start, done: true, error: null };
      }
    }
    return { used: end - start, done: this.state === 'done', error: null };
  }

  private extensionByte(byte: number): string | null {
    switch (this.extension) {
      case 0: // name
        if (isTokenByte(byte)) {
          this.extensionLength++;
          return null;
        }
        if (this.extensionLength === 0) return 'an empty chunk extension';
        return this.afterExtensionPart(byte, true);
      case 1: // first byte of a value
        if (byte === 0x22) this.extension = 3;
        else if (isTokenByte(byte)) this.extension = 2;
        else return 'a malformed chunk extension value';
        return null;
      case 2: // token value
        if (isTokenByte(byte)) return null;
        return this.afterExtensionPart(byte, false);
      case 3: // quoted string
        if (byte === 0x22) this.extension = 5;
        else if (byte === 0x5c) this.extension = 4;
        else if (byte !== 0x09 && (byte < 0x20 || byte === 0x7f))
          return 'a control character in a chunk extension';
        return null;
      case 4: // after a backslash
        if (byte !== 0x09 && (byte < 0x20 || byte === 0x7f))
          return 'a control character in a chunk extension';
        this.extension = 3;
        return null;
      default: // after a quoted string
        return this.afterExtensionPart(byte, false);
    }
  }

  private afterExtensionPart(byte: number, mayHaveValue: boolean): string | null {
    if (byte === CR) {
      this.state = 'size-lf';
      return null;
    }
    if (byte === 0x3b) {
      this.extension = 0;
      this.extensionLength = 0;
      return null;
    }
    if (mayHaveValue && byte === 0x3d) {
      this.extension = 1;
      return null;
    }
    return 'a malformed chunk extension';
  }

  private fail(at: number, reason: string): ChunkedRead {
    return { used: at, done: false, error: reason };
  }
}

function hexValue(byte: number): number {
  if (byte >= 0x30 && byte <= 0x39) return byte - 0x30;
  if (byte >= 0x41 && byte <= 0x46) return byte - 0x37;
  if (byte >= 0x61 && byte <= 0x66) return byte - 0x57;
  return -1;
}
