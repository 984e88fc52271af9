/**
 * Compresses large payloads on their way to Temporal and back. A migration's input holds its plan
 * and both topologies (about 0.8 KB per component as JSON), and Temporal refuses any payload over
 * 2 MB: without compression a layout of about 2,500 components could not be migrated at all, and
 * every update result and query answer carried the same bulk. Topology JSON compresses about 19 to
 * 1, so the same limit is reached near 40,000 components.
 *
 * Payloads under `compressAbove` bytes are left as they are (readable in Temporal's UI and CLI). A
 * compressed payload keeps its metadata and says so in `cutover-encoding`; one without it is passed
 * through, so histories written before this codec (or by a client without it) still decode.
 *
 * The client, the worker and the replay tests must all use it: see `dataConverter` below.
 */
import { promisify } from 'node:util';
import { gunzip, gzip } from 'node:zlib';
import type { DataConverter, Payload, PayloadCodec } from '@temporalio/common';

const gzipAsync = promisify(gzip);
const gunzipAsync = promisify(gunzip);

/** Smaller payloads gain little and stay readable in Temporal's UI. */
export const compressAbove = 16 * 1024;
const marker = 'cutover-encoding';
const gzipName = new TextEncoder().encode('gzip');

export const payloadCodec: PayloadCodec = {
  async encode(payloads: Payload[]): Promise<Payload[]> {
    return Promise.all(
      payloads.map(async (payload) => {
        const data = payload.data;
        if (!data || data.length < compressAbove || payload.metadata?.[marker]) return payload;
        // Level 6 (the default): 3× smaller output than level 1 costs 2× the time, off the main thread.
        const packed = await gzipAsync(data);
        return { metadata: { ...payload.metadata, [marker]: gzipName }, data: new Uint8Array(packed) };
      }),
    );
  },
  async decode(payloads: Payload[]): Promise<Payload[]> {
    return Promise.all(
      payloads.map(async (payload) => {
        const encoding = payload.metadata?.[marker];
        if (!encoding) return payload;
        const name = new TextDecoder().decode(encoding);
        if (name !== 'gzip')
          throw new Error(`a Temporal payload is encoded as "${name}", unknown to this cutover`);
        const { [marker]: _, ...metadata } = payload.metadata ?? {};
        return { metadata, data: new Uint8Array(await gunzipAsync(payload.data ?? new Uint8Array())) };
      }),
    );
  },
};

/** For Client, Worker.create and Worker.runReplayHistory alike. */
export const dataConverter: DataConverter = { payloadCodecs: [payloadCodec] };

/** The size of a value as Temporal will store it (JSON, compressed when large), for limits checked up front. */
export async function storedSize(value: unknown): Promise<number> {
  const data = new TextEncoder().encode(JSON.stringify(value));
  const [encoded] = await payloadCodec.encode([{ metadata: {}, data }]);
  return encoded?.data?.length ?? 0;
}
