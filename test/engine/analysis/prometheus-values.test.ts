/**
 * How the Prometheus check reads a sample's value, against a small local HTTP server answering as
 * Prometheus's `/api/v1/query` does: "+Inf" / "-Inf" (a ratio dividing by zero) are infinities that
 * a bound judges, not NaN; "NaN" (0/0) stays inconclusive.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { runPrometheusCheck } from '../../../engine/analysis/prometheus.js';

let server: http.Server;
let url: string;
/** The value the fake Prometheus answers for the query named `v=<value>`. */
beforeAll(async () => {
  server = http.createServer((request, response) => {
    const query = new URL(request.url ?? '/', 'http://x').searchParams.get('query') ?? '';
    const value = query.replace(/^v=/, '');
    response.setHeader('content-type', 'application/json');
    response.end(
      JSON.stringify({
        status: 'success',
        data: { resultType: 'vector', result: [{ metric: {}, value: [1_700_000_000, value] }] },
      }),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

it('judges +Inf above a max and -Inf below a min as breaches, with the value in the reason', async () => {
  const above = await runPrometheusCheck({ url, query: 'v=+Inf', max: 0.01 });
  expect(above).toMatchObject({ outcome: 'breach', value: Number.POSITIVE_INFINITY });
  expect(above.failed).toBeUndefined();
  expect(above.reason).toBe('prometheus `v=+Inf` = Infinity > max 0.01');
  const below = await runPrometheusCheck({ url, query: 'v=-Inf', min: 99 });
  expect(below).toMatchObject({ outcome: 'breach', value: Number.NEGATIVE_INFINITY });
  expect(below.reason).toBe('prometheus `v=-Inf` = -Infinity < min 99');
});

it('passes +Inf against a min, and still calls NaN inconclusive', async () => {
  expect(await runPrometheusCheck({ url, query: 'v=+Inf', min: 1 })).toMatchObject({ outcome: 'pass' });
  expect(await runPrometheusCheck({ url, query: 'v=NaN', max: 1 })).toMatchObject({
    outcome: 'inconclusive',
  });
  expect(await runPrometheusCheck({ url, query: 'v=0.5', max: 1 })).toMatchObject({
    outcome: 'pass',
    value: 0.5,
  });
});
