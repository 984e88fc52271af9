/**
 * How `cutover server` serves the dashboard's files (server/dashboard.ts), through `inject` on the
 * server built in process: every answer with the strict Content-Security-Policy, gzip when asked,
 * assets kept for good and the page asked again, `/` sending browsers (only) to `/ui/`, and
 * `GET /v1/whoami` without tokens. The pages in a browser: dashboard.test.ts.
 */

import { gunzipSync } from 'node:zlib';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contentSecurityPolicy, readDashboard, registerDashboardRoutes } from '../../server/dashboard.js';
import { type InProcessServer, ServerHarness } from '../support/server.js';

const harness = new ServerHarness();
let server: InProcessServer;

beforeAll(async () => {
  server = await harness.startInProcess({ stateDir: await harness.stateDir(), args: ['--rate-limit', '0'] });
}, 30_000);

afterAll(async () => {
  await harness.cleanup();
}, 30_000);

describe('the dashboard routes', () => {
  it('serves the built page with its CSP, and its hashed assets gzipped and kept for good', async () => {
    const page = await server.app.inject({ method: 'GET', url: '/ui/', headers: { accept: 'text/html' } });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.headers['content-security-policy']).toBe(contentSecurityPolicy);
    expect(contentSecurityPolicy).toMatch(/default-src 'self'; script-src 'self'; style-src 'self'/);
    expect(page.headers['cache-control']).toBe('no-cache');
    expect(page.headers['x-content-type-options']).toBe('nosniff');
    // No inline script: every script is a file of the server's.
    expect(page.body).not.toMatch(/<script(?![^>]*\ssrc=)/);
    const script = /src="(\/ui\/assets\/main-[\w-]+\.js)"/.exec(page.body)?.[1];
    expect(script, page.body).toBeDefined();

    const gzipped = await server.app.inject({
      method: 'GET',
      url: script as string,
      headers: { 'accept-encoding': 'gzip, br' },
    });
    expect(gzipped.statusCode).toBe(200);
    expect(gzipped.headers['content-encoding']).toBe('gzip');
    expect(gzipped.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(gzipped.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect(gzipped.headers['content-security-policy']).toBe(contentSecurityPolicy);
    const plain = await server.app.inject({ method: 'GET', url: script as string });
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(gunzipSync(gzipped.rawPayload).toString('utf8')).toBe(plain.body);
  });

  it('sends a browser asking for / to /ui/, and answers anything else there as before (404)', async () => {
    const browser = await server.app.inject({
      method: 'GET',
      url: '/',
      headers: { accept: 'text/html,*/*' },
    });
    expect(browser.statusCode).toBe(302);
    expect(browser.headers.location).toBe('/ui/');
    const client = await server.app.inject({
      method: 'GET',
      url: '/',
      headers: { accept: 'application/json' },
    });
    expect(client.statusCode).toBe(404);
    expect(client.json().code).toBe('NOT_FOUND');
    const missing = await server.app.inject({ method: 'GET', url: '/ui/assets/main-nothere.js' });
    expect(missing.statusCode).toBe(404);
    expect(missing.json().code).toBe('NOT_FOUND');
  });

  it('answers GET /v1/whoami without tokens as the anonymous operator, auth off', async () => {
    const r = await server.app.inject({ method: 'GET', url: '/v1/whoami' });
    expect(r.statusCode).toBe(200);
    expect(r.json()).toEqual({ name: 'anonymous', role: 'operator', auth: false });
  });

  it('says how to build the dashboard when dist/ui is missing', async () => {
    const files = readDashboard('/nonexistent/cutover-ui');
    expect(files.size).toBe(0);
    const app = Fastify();
    registerDashboardRoutes(app, files);
    const r = await app.inject({ method: 'GET', url: '/ui' });
    await app.close();
    expect(r.statusCode).toBe(200);
    expect(r.body).toContain('The dashboard is not built: run <code>npm run build</code>');
    expect(r.headers['content-security-policy']).toBe(contentSecurityPolicy);
  });
});
