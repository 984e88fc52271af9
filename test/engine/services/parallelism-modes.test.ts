/**
 * `--parallelism` where a mode cannot honour it is refused before anything starts, in one line
 * that says what to do: Temporal runs one driver call at a time for now, and a server takes the
 * bound from the topology it plans.
 */
import { describe, expect, it } from 'vitest';
import { httpService } from '../../../engine/services/http-service.js';
import { temporalService } from '../../../engine/services/temporal-service.js';

const request = { file: 'topology.yaml', text: 'apiVersion: cutover/v1\n', baseDir: '/tmp', parallelism: 4 };

describe('--parallelism in other modes', () => {
  it('Temporal mode refuses it (one call at a time for now) without connecting', async () => {
    // Port 9 on loopback: nothing answers there; the refusal must come before any connection.
    const service = temporalService({ address: '127.0.0.1:9', namespace: 'default', taskQueue: 'q' });
    await expect(service.start(request)).rejects.toMatchObject({
      code: 'NOT_SUPPORTED',
      message: expect.stringMatching(
        /^--parallelism 4: Temporal mode runs one driver call at a time for now; drop --parallelism, or migrate in local mode$/,
      ),
    });
  });

  it('a client of a server refuses it, naming the server', async () => {
    const service = httpService('http://127.0.0.1:9', undefined);
    await expect(service.start(request)).rejects.toMatchObject({
      code: 'NOT_SUPPORTED',
      message: expect.stringContaining(
        '--parallelism is not available through a cutover server (http://127.0.0.1:9)',
      ),
    });
  });
});
