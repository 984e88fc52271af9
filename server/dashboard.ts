/**
 * The dashboard (ui/, built into dist/ui by `npm run build`): static files served at /ui, read
 * once when the server starts and kept in memory with their gzip. They hold no data and need no
 * token: the page signs in and reads everything through the /v1 API like any other client.
 *
 * Every answer carries a strict Content-Security-Policy: scripts, styles, images and connections
 * only from this server, no inline script, no frame, no form posting elsewhere. So the page makes
 * no request to anything outside the server (no CDN, no web font), and an injected string in a
 * migration's log cannot run as script.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { packageRoot } from '../engine/api.js';

export const contentSecurityPolicy = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "font-src 'none'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

interface StaticFile {
  body: Buffer;
  gzip: Buffer;
  type: string;
}

const types: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};

/** The built dashboard's files by path under /ui (`index.html`, `assets/main-1a2b.js`); empty when not built. */
export function readDashboard(dir = path.join(packageRoot(), 'dist', 'ui')): Map<string, StaticFile> {
  const files = new Map<string, StaticFile>();
  let names: string[];
  try {
    names = readdirSync(dir, { recursive: true, encoding: 'utf8' });
  } catch {
    return files;
  }
  for (const name of names) {
    const type = types[path.extname(name)];
    if (type === undefined) continue;
    const body = readFileSync(path.join(dir, name));
    files.set(name.split(path.sep).join('/'), { body, gzip: gzipSync(body, { level: 9 }), type });
  }
  return files;
}

const notBuilt =
  '<!doctype html><html lang="en"><title>cutover</title><p>The dashboard is not built: run <code>npm run build</code> in the cutover package, then restart the server.</p></html>';

function send(request: FastifyRequest, reply: FastifyReply, file: StaticFile, cache: string): FastifyReply {
  const gzip = /\bgzip\b/.test(String(request.headers['accept-encoding'] ?? ''));
  void reply
    .header('content-security-policy', contentSecurityPolicy)
    .header('x-content-type-options', 'nosniff')
    .header('referrer-policy', 'no-referrer')
    .header('cache-control', cache)
    .header('vary', 'accept-encoding')
    .type(file.type);
  if (gzip) void reply.header('content-encoding', 'gzip');
  return reply.send(gzip ? file.gzip : file.body);
}

/** Whether a request is a browser asking for a page (not an API client). */
function wantsHtml(request: FastifyRequest): boolean {
  return String(request.headers.accept ?? '').includes('text/html');
}

/** The dashboard's routes, as `METHOD /path` (left out of the OpenAPI document: pages, not operations). */
export const dashboardRoutes: readonly string[] = ['GET /', 'GET /ui', 'GET /ui/', 'GET /ui/assets/{file}'];

export function registerDashboardRoutes(app: FastifyInstance, files: Map<string, StaticFile>): void {
  // Not in the API's OpenAPI document: pages, not operations.
  const options = { config: { access: 'public' as const }, schema: { hide: true } };
  const index: StaticFile = files.get('index.html') ?? {
    body: Buffer.from(notBuilt),
    gzip: gzipSync(notBuilt),
    type: types['.html'] as string,
  };
  // index.html names its assets by hash: it is asked again every time, they are kept for good.
  const page = async (request: FastifyRequest, reply: FastifyReply) =>
    send(request, reply, index, 'no-cache');
  app.get('/ui', options, page);
  app.get('/ui/', options, page);
  app.get<{ Params: { file: string } }>('/ui/assets/:file', options, async (request, reply) => {
    const file = files.get(`assets/${request.params.file}`);
    if (!file) return reply.callNotFound();
    return send(request, reply, file, 'public, max-age=31536000, immutable');
  });
  app.get('/', options, async (request, reply) => {
    if (!wantsHtml(request)) return reply.callNotFound();
    return reply.redirect('/ui/', 302);
  });
}
