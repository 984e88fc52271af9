/** The router's view of WebSocket framing: where frames end in a forwarded stream, and its close frame. */
import { describe, expect, it } from 'vitest';
import { closeFrame, FrameTracker } from '../../router/websocket-frames.js';

/** A frame as a peer sends it: FIN, `opcode`, masked or not, `length` bytes of payload. */
function frame(opcode: number, length: number, masked: boolean): Buffer {
  const extended = length < 126 ? 0 : length < 65_536 ? 2 : 8;
  const header = Buffer.alloc(2 + extended + (masked ? 4 : 0));
  header[0] = 0x80 | opcode;
  const code = length < 126 ? length : length < 65_536 ? 126 : 127;
  header[1] = (masked ? 0x80 : 0) | code;
  if (extended === 2) header.writeUInt16BE(length, 2);
  if (extended === 8) header.writeBigUInt64BE(BigInt(length), 2);
  return Buffer.concat([header, Buffer.alloc(length, 7)]);
}

describe('FrameTracker', () => {
  it('follows frames of every length form, cut anywhere, and stops only at a boundary', () => {
    const stream = Buffer.concat([
      frame(1, 5, true),
      frame(2, 300, false),
      frame(2, 70_000, true),
      frame(8, 2, true),
    ]);
    for (const cut of [1, 2, 3, 7, 13, 100, 4096]) {
      const tracker = new FrameTracker();
      for (let i = 0; i < stream.length; i += cut) tracker.advance(stream.subarray(i, i + cut));
      expect(tracker.atBoundary).toBe(true);
      expect(tracker.closeSeen).toBe(true);
    }
    // Mid-frame: forward the rest of that frame, not a byte of the next.
    const tracker = new FrameTracker();
    const first = frame(2, 300, false);
    tracker.advance(first.subarray(0, 100));
    expect(tracker.atBoundary).toBe(false);
    const rest = Buffer.concat([first.subarray(100), frame(1, 5, false)]);
    expect(tracker.advance(rest, true)).toBe(first.length - 100);
    expect(tracker.atBoundary).toBe(true);
    expect(tracker.advance(frame(1, 5, false), true)).toBe(0);
    expect(tracker.closeSeen).toBe(false);
  });

  it('builds close frames a peer reads: code and reason, masked toward a server', () => {
    const plain = closeFrame(1001, 'going away', false);
    expect(plain[0]).toBe(0x88);
    expect(plain[1]).toBe(12);
    expect(plain.readUInt16BE(2)).toBe(1001);
    expect(plain.subarray(4).toString()).toBe('going away');
    const masked = closeFrame(1001, 'going away', true);
    expect(masked[1]).toBe(0x80 | 12);
    const key = masked.subarray(2, 6);
    const payload = Buffer.from(masked.subarray(6).map((byte, i) => byte ^ (key[i % 4] as number)));
    expect(payload.readUInt16BE(0)).toBe(1001);
    expect(payload.subarray(2).toString()).toBe('going away');
    const tracker = new FrameTracker();
    expect(tracker.advance(masked)).toBe(masked.length);
    expect(tracker.closeSeen && tracker.atBoundary).toBe(true);
  });
});
