/**
 * `--parallelism` where a mode cannot honour it is refused before anything starts, in one line
 * that says what to do. (Temporal mode honours it: test/temporal/parallel-activities.test.ts.)
 */
import { describe, expect, it } from 'vitest';
import { httpService } from '../../../engine/services/http-service.js';

const request = { file: 'topology.yaml', text: 'apiVersion: cutover/v1\n', baseDir: '/tmp', parallelism: 4 };

describe('--parallelism in other modes', () => {
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
