import { randomBytes } from 'node:crypto';

/**
 * Just enough of RFC 6455's framing for the router to close an upgraded WebSocket cleanly: where
 * frames begin and end in a byte stream it forwards (so a close frame of its own goes between two
 * frames, never into one), whether a close frame passed, and the close frame it sends itself.
 * Payloads are never read or unmasked; a frame is its 2-byte header, an extended length (2 or 8
 * bytes), a masking key when masked (4 bytes), then its payload.
 */

/** RFC 6455 §7.4.1: the endpoint is going away (the router drains the slot it leads to). */
export const goingAwayCode = 1001;

const closeOpcode = 0x8;
/** The longest frame header: 2 bytes, an 8-byte length, a 4-byte masking key. */
const maxHeaderBytes = 14;

/**
 * Follows the frames of one direction of a WebSocket connection. Invariant: `payloadLeft` bytes of
 * the current frame's payload are still to come, or `header` holds the part of the next frame's
 * header seen so far; at a boundary between frames both are empty.
 */
export class FrameTracker {
  private payloadLeft = 0;
  private header: Buffer | null = null;
  /** A close frame's header went by: that side began (or answered) the closing handshake. */
  closeSeen = false;

  get atBoundary(): boolean {
    return this.payloadLeft === 0 && this.header === null;
  }

  /**
   * Walks `chunk` and answers how many of its bytes to forward: all of them, or with
   * `stopAtBoundary`, those up to the first boundary between frames (0 when the stream is at one).
   */
  advance(chunk: Buffer, stopAtBoundary = false): number {
    let i = 0;
    while (i < chunk.length) {
      if (this.payloadLeft > 0) {
        const n = Math.min(this.payloadLeft, chunk.length - i);
        this.payloadLeft -= n;
        i += n;
        continue;
      }
      if (stopAtBoundary && this.header === null) return i;
      i = this.readHeader(chunk, i);
    }
    return i;
  }

  /** Takes header bytes from `chunk` at `from`; answers where it stopped. */
  private readHeader(chunk: Buffer, from: number): number {
    const seen = this.header;
    const take = Math.min(maxHeaderBytes - (seen?.length ?? 0), chunk.length - from);
    const bytes = seen
      ? Buffer.concat([seen, chunk.subarray(from, from + take)])
      : chunk.subarray(from, from + take);
    const length = headerLength(bytes);
    if (length === null || bytes.length < length) {
      // Not whole yet: kept (copied, the chunk is not ours) until the next chunk.
      this.header = Buffer.from(bytes);
      return from + take;
    }
    this.header = null;
    if (((bytes[0] as number) & 0x0f) === closeOpcode) this.closeSeen = true;
    this.payloadLeft = payloadLength(bytes);
    // The header's bytes that came from this chunk.
    return from + (length - (seen?.length ?? 0));
  }
}

/** The whole header's length once its first 2 bytes are known, else null. */
function headerLength(bytes: Buffer): number | null {
  if (bytes.length < 2) return null;
  const second = bytes[1] as number;
  const length7 = second & 0x7f;
  const extended = length7 === 126 ? 2 : length7 === 127 ? 8 : 0;
  return 2 + extended + (second & 0x80 ? 4 : 0);
}

function payloadLength(header: Buffer): number {
  const length7 = (header[1] as number) & 0x7f;
  if (length7 === 126) return header.readUInt16BE(2);
  // A 64-bit length: beyond 2^53 no stream gets that far anyway.
  if (length7 === 127) return Number(header.readBigUInt64BE(2));
  return length7;
}

/**
 * A close frame with `code` and a short reason: unmasked from a server (to the client), masked
 * from a client (to the upstream, where the router stands in for the client), RFC 6455 §5.3.
 */
export function closeFrame(code: number, reason: string, masked: boolean): Buffer {
  const text = Buffer.from(reason, 'utf8').subarray(0, 123);
  const payload = Buffer.alloc(2 + text.length);
  payload.writeUInt16BE(code, 0);
  text.copy(payload, 2);
  const header = Buffer.from([0x80 | closeOpcode, (masked ? 0x80 : 0) | payload.length]);
  if (!masked) return Buffer.concat([header, payload]);
  const key = randomBytes(4);
  for (let i = 0; i < payload.length; i++) payload[i] = (payload[i] as number) ^ (key[i % 4] as number);
  return Buffer.concat([header, key, payload]);
}
