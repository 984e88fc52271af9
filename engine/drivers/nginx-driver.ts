import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { request } from 'node:http';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseHostPort } from '../../core/host-port.js';
import type { DriverSpec } from '../../core/topology/types.js';
import { inheritedEnv } from '../secrets/resolve-secrets.js';
import { describeTraffic } from './describe-traffic.js';
import { readIfExists, restoreFile, writeAtomically } from './driver-files.js';
import {
  type BalancerRecord,
  type BalancerRoute,
  balancerRoute,
  balancerSpec,
  managedBalancerDriver,
  readBalancerRecord,
  refuseListenClash,
  routeKey,
} from './managed-balancer.js';
import { waitOldWorkersGone, workerHeader } from './nginx-drain.js';
import {
  type DriverCallOptions,
  PermanentDriverError,
  type RouteCallContext,
  type RouteDriver,
  type RouteState,
} from './types.js';

/**
 * The nginx route driver: every route of one `{ type: nginx, configFile, reload }` driver lives in
 * one generated file, `configFile`, that the user's nginx.conf includes inside `http {}`. The
 * driver's own record of those routes is a sidecar, `<configFile>.cutover.json`; every apply or
 * remove rewrites the sidecar, regenerates the whole file from it and reloads nginx, so the file
 * never depends on what it held before and several routes (or environments) can share it.
 *
 * A call returns once the new configuration is live, not merely signalled:
 * 1. `nginx -t` (the reload argv with `-s reload` swapped for `-t -q`) checks it first: `nginx -s
 *    reload` only signals the master and exits 0 even when the master then rejects the file and
 *    keeps the old one. A failed test puts the previous files back and is a permanent error.
 * 2. After the reload, the route's listener is polled on fresh connections until it has served
 *    only the new configuration's generation (a hash of the file, answered at `generationPath` by
 *    every generated server) for `nginxHandoverSettleMs`. That catches what `-t` cannot (a listen
 *    port held by another process: the master logs it and keeps the old configuration), and it
 *    outlasts the handover during which old and new workers both accept.
 *
 * Generated servers close every client connection after its response (`keepalive_timeout 0`): an
 * old worker closes its idle keep-alive connections the moment it is told to stop, and a client
 * whose next request is already on its way gets a reset. RFC 9112 clients retry that; Node's
 * http.Agent, and many others, report it as a failed request.
 */
export function createNginxDriver(settings: NginxDriverSettings = {}): RouteDriver {
  const liveTimeoutMs = settings.liveTimeoutMs ?? nginxLiveTimeoutMs;
  return managedBalancerDriver({
    name: 'nginx',
    // One sidecar per generated file: calls are serialised on the file.
    recordOf: (ctx, route) => nginxFiles(ctx.baseDir, nginxSpec(ctx, route)).config,
    // Several routes of one driver (one file): one sidecar write, one file, one test, one reload.
    applyAll: async (ctx, states, options) => {
      const driver = nginxSpec(ctx, states[0]?.route ?? '');
      const files = nginxFiles(ctx.baseDir, driver);
      const sidecar = await readSidecar(files.sidecar);
      const routes = { ...sidecar.routes };
      const entries = states.map((state) => {
        const entry = sidecarEntry(ctx.environment, state);
        routes[routeKey(ctx.environment, state.route)] = entry;
        return entry;
      });
      const next: Sidecar = { version: 1, routes };
      for (const entry of entries) refuseListenClash(next, routeKey(ctx.environment, entry.route), entry);
      const config = await writeAndReload(files, driver, ctx.baseDir, next, options);
      const live = (served: Served) => typeof served === 'object' && served.generation === config.generation;
      await Promise.all(entries.map((entry) => waitLive(entry.listen, live, liveTimeoutMs, options.signal)));
      for (const state of states) {
        options.log(
          `route ${state.route}: nginx ${files.config}: ${describeTraffic(state)}, live (generation ${config.generation})`,
        );
      }
    },
    async remove(ctx, route, options) {
      const driver = nginxSpec(ctx, route);
      const files = nginxFiles(ctx.baseDir, driver);
      const sidecar = await readSidecar(files.sidecar);
      const key = routeKey(ctx.environment, route);
      const entry = sidecar.routes[key];
      const routes = { ...sidecar.routes };
      delete routes[key];
      const before = entry ? renderNginxConfig(sidecar).generation : undefined;
      await writeAndReload(files, driver, ctx.baseDir, { version: 1, routes }, options);
      // Gone once its listener no longer serves the configuration that still had it.
      const gone = (served: Served) =>
        served === 'refused' || (typeof served === 'object' && served.generation !== before);
      if (entry) await waitLive(entry.listen, gone, liveTimeoutMs, options.signal);
      options.log(`route ${route}: removed from nginx ${files.config}`);
    },
    // Blue is drained once the workers of the configurations before the switch have finished.
    async drain(ctx, route, _addresses, timeoutMs, options) {
      const files = nginxFiles(ctx.baseDir, nginxSpec(ctx, route));
      const entry = (await readSidecar(files.sidecar)).routes[routeKey(ctx.environment, route)];
      if (!entry) return null;
      return waitOldWorkersGone(entry.listen, generationPath, timeoutMs, options.signal);
    },
  });
}

export interface NginxDriverSettings {
  /** Longest a listener may take to serve a new configuration after the reload (default 15 s). */
  liveTimeoutMs?: number;
}

/** Longest a reload or config test may run. */
export const nginxCommandTimeoutMs = 30_000;
/** Longest a listener may take to serve a configuration after the reload signalled it. */
export const nginxLiveTimeoutMs = 15_000;
/**
 * How long a listener must keep answering from the new configuration before a call returns: covers
 * the 100 ms nginx's master waits between starting new workers and stopping the old ones.
 */
export const nginxHandoverSettleMs = 250;
const livePollIntervalMs = 20;
const livePollRequestTimeoutMs = 1_000;
const stderrTailLines = 10;
/** Answered by every generated server with the hash of the file it was loaded from. */
export const generationPath = '/.well-known/cutover/generation';

/** The sidecar: what the driver knows about every route in one generated file. */
export type Sidecar = BalancerRecord<SidecarEntry>;

/** A route in the sidecar: upstreamTimeout is proxy_read_timeout, bodyTimeout client_body_timeout (absent: 60 s). */
export interface SidecarEntry extends BalancerRoute {
  updatedAt: number;
}

interface NginxFiles {
  config: string;
  sidecar: string;
}

type NginxDriverSpec = Extract<DriverSpec, { type: 'nginx' }>;

export function nginxSpec(ctx: RouteCallContext, route: string): NginxDriverSpec {
  return balancerSpec(ctx, 'nginx', route);
}

export function nginxFiles(baseDir: string, driver: NginxDriverSpec): NginxFiles {
  const config = path.resolve(baseDir, driver.configFile);
  return { config, sidecar: `${config}.cutover.json` };
}

// queueTimeout has no equivalent: nginx opens upstream connections without a limit, never queues.
function sidecarEntry(environment: string, state: RouteState): SidecarEntry {
  return { ...balancerRoute(environment, state, { bodyTimeout: true }), updatedAt: Date.now() };
}

export function readSidecar(file: string): Promise<Sidecar> {
  return readBalancerRecord(file, 'cutover nginx sidecar');
}

/**
 * Writes the sidecar and the file, tests the configuration and reloads nginx. A failed test puts
 * both files back as they were, so nginx's next start or reload does not pick up a broken file.
 */
async function writeAndReload(
  files: NginxFiles,
  driver: NginxDriverSpec,
  baseDir: string,
  sidecar: Sidecar,
  options: DriverCallOptions,
): Promise<RenderedConfig> {
  const config = renderNginxConfig(sidecar);
  const previous = { config: await readIfExists(files.config), sidecar: await readIfExists(files.sidecar) };
  await writeAtomically(files.sidecar, `${JSON.stringify(sidecar, null, 2)}\n`);
  await writeAtomically(files.config, config.text);
  const testArgv = configTestArgv(driver.reload);
  if (!testArgv) options.log(`${driver.reload.join(' ')} is not \`nginx … -s reload\`: no config test first`);
  else {
    const test = await runCommand(testArgv, baseDir, options.signal);
    if (test.code !== 0) {
      await restoreFile(files.config, previous.config);
      await restoreFile(files.sidecar, previous.sidecar);
      throw new PermanentDriverError(
        `nginx rejected the generated ${files.config} (${testArgv.join(' ')} exited ${test.code}); ` +
          `the previous file is back in place:\n${test.stderrTail}`,
      );
    }
  }
  const reload = await runCommand(driver.reload, baseDir, options.signal);
  if (reload.code !== 0) {
    const message = `${driver.reload.join(' ')} exited ${reload.code}:\n${reload.stderrTail}`;
    if (/\[emerg\]|test failed/.test(reload.stderrTail)) throw new PermanentDriverError(message);
    throw new Error(message);
  }
  return config;
}

/**
 * `nginx … -s reload` → `nginx … -t -q`: the same binary, prefix, config and -g directives. null
 * for any other reload command (a script, systemctl): its exit status is then the only check.
 */
export function configTestArgv(reload: readonly string[]): string[] | null {
  const [program, ...args] = reload;
  if (program === undefined || path.basename(program) !== 'nginx') return null;
  const signal = args.findIndex((arg, i) => arg === '-s' && args[i + 1] === 'reload');
  if (signal < 0) return null;
  return [program, ...args.slice(0, signal), ...args.slice(signal + 2), '-t', '-q'];
}

interface CommandResult {
  /** The exit code, or a description of how it ended otherwise (a signal, a spawn error). */
  code: number | string;
  stderrTail: string;
}

function runCommand(argv: readonly string[], cwd: string, signal: AbortSignal): Promise<CommandResult> {
  const [program, ...args] = argv;
  if (program === undefined) throw new PermanentDriverError('the nginx reload command is empty');
  return new Promise((resolve, reject) => {
    const child = spawn(program, args, {
      cwd,
      env: inheritedEnv(),
      stdio: ['ignore', 'ignore', 'pipe'],
      timeout: nginxCommandTimeoutMs,
      killSignal: 'SIGKILL',
      signal,
    });
    let stderr = '';
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (text: string) => {
      stderr = (stderr + text).slice(-8_192);
    });
    const tail = () => stderr.trim().split('\n').slice(-stderrTailLines).join('\n');
    child.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT')
        reject(new PermanentDriverError(`${program} not found: is nginx installed and on PATH?`));
      else if (error.name === 'AbortError') reject(error);
      else resolve({ code: error.message, stderrTail: tail() });
    });
    child.on('close', (code, exitSignal) =>
      resolve({
        code:
          code ??
          `by ${exitSignal}${exitSignal === 'SIGKILL' ? ` (timeout ${nginxCommandTimeoutMs} ms?)` : ''}`,
        stderrTail: tail(),
      }),
    );
  });
}

/**
 * What a listener answers at `generationPath` on a fresh connection: the generation it serves,
 * `refused` once no process holds its socket any more, or `unknown` (an error, a timeout, another
 * answer).
 */
export type Served = { generation: string } | 'refused' | 'unknown';

/**
 * Polls `listen` until it has answered `done` for `nginxHandoverSettleMs` in a row. The first
 * answer from the new configuration is not enough: the master starts the new workers, sleeps
 * 100 ms, and only then tells the old ones to stop accepting, so for a while either may answer.
 */
async function waitLive(
  listen: string,
  done: (served: Served) => boolean,
  timeoutMs: number,
  signal: AbortSignal,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let served: Served = 'unknown';
  let doneSince: number | undefined;
  for (;;) {
    signal.throwIfAborted();
    served = await servedGeneration(listen);
    if (!done(served)) doneSince = undefined;
    else if (doneSince === undefined) doneSince = Date.now();
    else if (Date.now() - doneSince >= nginxHandoverSettleMs) return;
    if (Date.now() > deadline) break;
    await sleep(livePollIntervalMs, undefined, { signal });
  }
  const what = typeof served === 'object' ? `generation ${served.generation}` : served;
  throw new Error(
    `nginx did not put the new configuration live on ${listen} within ${timeoutMs} ms ` +
      `(last answer: ${what}); nginx's error log says why`,
  );
}

/** A fresh connection per poll, so that whichever worker accepts now answers it. */
export function servedGeneration(listen: string): Promise<Served> {
  const address = parseHostPort(listen);
  if (!address) return Promise.resolve('unknown');
  const host = { '0.0.0.0': '127.0.0.1', '::': '::1', '*': '127.0.0.1' }[address.host] ?? address.host;
  return new Promise((resolve) => {
    const req = request(
      {
        host,
        port: address.port,
        path: generationPath,
        agent: false,
        headers: { connection: 'close' },
        timeout: livePollRequestTimeoutMs,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          body += chunk;
        });
        res.on('end', () => resolve(res.statusCode === 200 ? { generation: body.trim() } : 'unknown'));
        res.on('error', () => resolve('unknown'));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (error: NodeJS.ErrnoException) =>
      resolve(error.code === 'ECONNREFUSED' ? 'refused' : 'unknown'),
    );
    req.end();
  });
}

// ---- rendering: pure --------------------------------------------------------------------------

export interface RenderedConfig {
  text: string;
  /** A hash of everything else in the file: the same routes always give the same generation. */
  generation: string;
}

export interface WeightedServer {
  address: string;
  slot: 'blue' | 'green';
  weight: number;
}

const generationPlaceholder = '@@GENERATION@@';

/** The whole generated file for a sidecar, routes in key order. */
export function renderNginxConfig(sidecar: Sidecar): RenderedConfig {
  const blocks = Object.keys(sidecar.routes)
    .sort()
    .map((key) => renderRoute(sidecar.routes[key] as SidecarEntry));
  const body = [
    '# Generated by cutover from the sidecar beside it (.cutover.json): do not edit, every',
    '# route change rewrites this file and reloads nginx.',
    `# generation ${generationPlaceholder}`,
    ...blocks,
  ].join('\n');
  const generation = createHash('sha256').update(body).digest('hex').slice(0, 16);
  return { text: `${body.replaceAll(generationPlaceholder, generation)}\n`, generation };
}

function renderRoute(entry: SidecarEntry): string {
  const name = upstreamName(entry.environment, entry.route);
  const lines = [
    ``,
    `# ${entry.environment}/${entry.route}: ${100 - entry.greenPercent}% blue, ${entry.greenPercent}% green`,
  ];
  lines.push(...renderListener(name, entry.listen, mainServers(entry), entry));
  if (entry.preview !== undefined)
    lines.push(...renderListener(`${name}_preview`, entry.preview, previewServers(entry), entry));
  return lines.join('\n');
}

/** An upstream and the server in front of it; a server that answers 503 when there is no upstream. */
function renderListener(
  name: string,
  listen: string,
  servers: WeightedServer[],
  { upstreamTimeoutMs, bodyTimeoutMs }: Pick<SidecarEntry, 'upstreamTimeoutMs' | 'bodyTimeoutMs'>,
): string[] {
  const server = (location: string[]) => [
    'server {',
    `    listen ${listen};`,
    '    keepalive_timeout 0; # a reload resets idle keep-alive clients: see createNginxDriver',
    `    location = ${generationPath} {`,
    '        default_type text/plain;',
    `        add_header ${workerHeader} $pid always; # the worker answering: see nginx-drain.ts`,
    `        return 200 "${generationPlaceholder}\\n";`,
    '    }',
    '    location / {',
    ...location.map((line) => `        ${line}`),
    '    }',
    '}',
  ];
  if (servers.length === 0) return server(['return 503;']);
  const slotVariable = `$${name.replaceAll('-', '__')}_slot`;
  const connectionVariable = `$${name.replaceAll('-', '__')}_connection`;
  return [
    `upstream ${name} {`,
    ...servers.map((s) => `    server ${s.address} weight=${s.weight}; # ${s.slot}`),
    '    keepalive 32;',
    '}',
    // $upstream_addr lists every server tried ("a, b"): the last one answered.
    `map $upstream_addr ${slotVariable} {`,
    '    default "";',
    ...servers.map((s) => `    "~(^| )${escapeRegex(s.address)}$" ${s.slot};`),
    '}',
    // A WebSocket (or other) upgrade goes through with its Upgrade and Connection headers; any
    // other request gets no Connection header, so the upstream's kept-alive connection stays open.
    // Per listener: two files nginx includes must not define one variable twice.
    `map $http_upgrade ${connectionVariable} {`,
    '    default upgrade;',
    `    "" "";`,
    '}',
    ...server([
      `proxy_pass http://${name};`,
      'proxy_http_version 1.1;',
      'proxy_set_header Upgrade $http_upgrade;',
      `proxy_set_header Connection ${connectionVariable};`,
      'proxy_set_header Host $http_host;',
      'proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;',
      'proxy_set_header X-Forwarded-Proto $scheme;',
      'proxy_next_upstream error timeout http_502 http_503;',
      'proxy_next_upstream_tries 3;',
      ...(upstreamTimeoutMs !== undefined ? [`proxy_read_timeout ${upstreamTimeoutMs}ms;`] : []),
      ...(bodyTimeoutMs !== undefined ? [`client_body_timeout ${bodyTimeoutMs}ms;`] : []),
      `add_header X-Cutover-Slot ${slotVariable} always;`,
    ]),
  ];
}

function upstreamName(environment: string, route: string): string {
  return `cutover_${environment}_${route}`.replace(/[^A-Za-z0-9_-]/g, '_');
}

function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/**
 * The main listener's servers: each slot's share spread over its replicas, as the smallest integer
 * weights that keep the split exact. A slot at 0% is left out (it is not trusted yet, or is being
 * drained); when every slot with replicas is at 0%, what exists serves (as the built-in router does).
 */
export function mainServers(entry: Pick<SidecarEntry, 'blue' | 'green' | 'greenPercent'>): WeightedServer[] {
  const share = { blue: 100 - entry.greenPercent, green: entry.greenPercent };
  const present = (['blue', 'green'] as const).filter((slot) => entry[slot].length > 0);
  const sharing = present.filter((slot) => share[slot] > 0);
  if (sharing.length === 0) return present.flatMap((slot) => servers(slot, entry[slot], 1));
  const lcm = sharing.reduce((acc, slot) => (acc * entry[slot].length) / gcd(acc, entry[slot].length), 1);
  const raw = sharing.map((slot) => ({ slot, weight: (share[slot] * lcm) / entry[slot].length }));
  const divisor = raw.reduce((acc, r) => gcd(acc, r.weight), 0);
  return raw.flatMap((r) => servers(r.slot, entry[r.slot], r.weight / divisor));
}

/** The preview listener reaches green only (blue while there is no green, as the router does). */
function previewServers(entry: SidecarEntry): WeightedServer[] {
  return entry.green.length > 0 ? servers('green', entry.green, 1) : servers('blue', entry.blue, 1);
}

function servers(slot: 'blue' | 'green', addresses: string[], weight: number): WeightedServer[] {
  return addresses.map((address) => ({ address, slot, weight }));
}

function gcd(a: number, b: number): number {
  return b === 0 ? a : gcd(b, a % b);
}
