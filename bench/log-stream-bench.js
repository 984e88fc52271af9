/**
 * Log-stream bench: the CPU a real `cutover server` spends while clients follow one migration's
 * log (`GET /v1/migrations/:id/logs?follow=true`), with 1 stream open and with 200. Streams of a
 * migration share one reader of its log, so the cost should not grow with the streams: the ratio
 * of the two is the figure (each stream polling on its own cost ~200 times as much at 200).
 * CPU is the server process's user + system time from /proc/<pid>/stat (Linux).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { judgeGoal, strictGoal } from './support.js';

export const name = 'log-streams';
export const title = 'Server: CPU while following one migration’s log, 1 stream vs 200';
export const columns = [
  { key: 'streams', label: 'open streams' },
  { key: 'cpuPercent', label: 'server CPU % of a core', format: (v) => v.toFixed(2) },
  { key: 'readers', label: 'log readers' },
];

const repoRoot = fileURLToPath(new URL('..', import.meta.url));
const manyStreams = 200;
const ticksPerSecond = 100; // USER_HZ on Linux

function startServer(stateDir) {
  const child = spawn(
    process.execPath,
    [
      path.join(repoRoot, 'bin/cutover.js'),
      'server',
      '--port',
      '0',
      '--state-dir',
      stateDir,
      '--workdir',
      repoRoot,
      '--rate-limit',
      '0',
      '--max-log-streams',
      String(manyStreams * 2),
      '--max-log-streams-per-token',
      String(manyStreams * 2),
      '--log-level',
      'warn',
    ],
    { cwd: repoRoot, stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, CUTOVER_TOKENS: '' } },
  );
  return new Promise((resolve, reject) => {
    let err = '';
    child.stderr.on('data', (chunk) => {
      err += chunk;
      const match = /listening on (http:\/\/[0-9.:]+)/.exec(err);
      if (match) resolve({ child, url: match[1] });
    });
    child.once('exit', (code) => reject(new Error(`the server exited ${code}: ${err}`)));
  });
}

async function call(url, method, body) {
  const response = await fetch(url, {
    method,
    ...(body === undefined
      ? {}
      : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, text, json: () => JSON.parse(text) };
}

/** Opens a follow stream on a connection of its own; resolves once its head has arrived. */
function openStream(url) {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent: false }, (res) => {
      res.resume();
      resolve({ status: res.statusCode, close: () => req.destroy() });
    });
    req.on('error', (error) => {
      if (!req.destroyed) reject(error);
    });
    req.end();
  });
}

function cpuTicks(pid) {
  // Fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]);
}

async function measure(pid, seconds) {
  const before = cpuTicks(pid);
  await sleep(seconds * 1000);
  return ((cpuTicks(pid) - before) / ticksPerSecond / seconds) * 100;
}

async function gauge(url, metric) {
  const { text } = await call(`${url}/metrics`, 'GET');
  return Number(new RegExp(`^${metric} (\\S+)$`, 'm').exec(text)?.[1]);
}

export async function run({ quick, log }) {
  const seconds = quick ? 5 : 15;
  const stateDir = mkdtempSync(path.join(tmpdir(), 'cutover-log-stream-bench-'));
  const server = await startServer(stateDir);
  const streams = [];
  let id;
  try {
    const topologyPath = 'examples/exec-demo/topology.yaml';
    const text = readFileSync(path.join(repoRoot, topologyPath), 'utf8')
      .replace(/^ {2}name: exec-demo$/m, '  name: log-stream-bench')
      .concat('\nstrategy:\n  bake: 30m\n  commit: auto\n');
    const applied = await call(`${server.url}/v1/apply`, 'POST', { topology: text, path: topologyPath });
    if (applied.status !== 202) throw new Error(`apply: ${applied.status} ${applied.text}`);
    id = applied.json().summary.id; // 202: { summary, planId }
    // Measured while it bakes: a migration in flight, its log quiet.
    for (;;) {
      const { json } = await call(`${server.url}/v1/migrations/${id}`, 'GET');
      if (json().summary.status.includes('bake')) break;
      await sleep(100);
    }
    const streamUrl = `${server.url}/v1/migrations/${id}/logs?follow=true`;
    const rows = [];
    for (const target of [1, manyStreams]) {
      while (streams.length < target) {
        const s = await openStream(streamUrl);
        if (s.status !== 200) throw new Error(`stream ${streams.length + 1}: ${s.status}`);
        streams.push(s);
      }
      await sleep(1000); // settle: the opening requests' own work is not what is measured
      const cpuPercent = await measure(server.child.pid, seconds);
      const readers = await gauge(server.url, 'cutover_log_readers');
      log(`${target} stream(s): ${cpuPercent.toFixed(2)} % of a core, ${readers} reader(s)`);
      rows.push({ streams: target, cpuPercent, readers });
    }
    const [one, many] = rows;
    // One tick (10 ms) of CPU over the window is the resolution: below it, count one tick.
    const floor = (1 / ticksPerSecond / seconds) * 100;
    const ratio = Math.max(many.cpuPercent, floor) / Math.max(one.cpuPercent, floor);
    return {
      rows,
      goals: [
        // A reader per stream would make it about manyStreams times.
        judgeGoal({
          label: `server CPU with ${manyStreams} streams relative to 1`,
          value: ratio,
          target: 3,
          exclusive: true,
          failBeyond: 4.5,
          detail: `${one.cpuPercent.toFixed(2)} % → ${many.cpuPercent.toFixed(2)} % of a core`,
        }),
        strictGoal({
          label: `log readers with ${manyStreams} streams of one migration`,
          value: many.readers,
          target: '= 1 (one shared reader per migration)',
          pass: many.readers === 1,
        }),
      ],
      notes: [
        `${seconds} s per measure, a migration in its bake (its log quiet) followed by every stream; heartbeats every 15 s per stream`,
      ],
    };
  } finally {
    for (const s of streams) s.close();
    if (id !== undefined)
      await call(`${server.url}/v1/migrations/${id}/cancel`, 'POST').catch(() => undefined);
    await waitEnded(server.url, id);
    server.child.kill('SIGTERM');
    await new Promise((resolve) => server.child.once('exit', resolve));
    rmSync(stateDir, { recursive: true, force: true });
  }
}

/** Waits (bounded) until the cancelled migration has ended, so that no runner outlives the bench. */
async function waitEnded(url, id) {
  if (id === undefined) return;
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const r = await call(`${url}/v1/migrations/${id}`, 'GET').catch(() => null);
    const summary = r?.status === 200 ? r.json().summary : null;
    if (summary === null || (summary.endedAt !== null && summary.runnerPid === null)) return;
    await sleep(200);
  }
}
