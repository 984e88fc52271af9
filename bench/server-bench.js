/**
 * Server bench: `POST /v1/plan` of a 100-component topology on a real `cutover server`, next to a
 * trivial Fastify route (a small JSON POST answered at once) in a process of its own, in the same
 * run, both driven by autocannon with the same connections and duration. Rounds alternate between
 * the two so that a noisy machine skews both alike; the medians and their ratio are reported.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { generateLayout, layoutToYaml } from './generate-topology.js';
import { median, recordedGoal, strictGoal } from './support.js';

export const name = 'server';
export const title = 'Server: POST /v1/plan (100 components) next to a trivial Fastify route';
export const columns = [
  { key: 'target', label: 'target' },
  { key: 'rps', label: 'req/s', format: (v) => v.toFixed(0) },
  { key: 'p50', label: 'p50 ms', format: (v) => v.toFixed(1) },
  { key: 'p99', label: 'p99 ms', format: (v) => v.toFixed(1) },
  { key: 'errors', label: 'non-2xx + errors' },
];

const repoRoot = fileURLToPath(new URL('..', import.meta.url));
const connections = 16;

/** A Fastify app with one trivial route, the baseline: what Fastify itself costs here. */
const trivialServer = `
import Fastify from 'fastify';
const app = Fastify({ logger: false });
app.post('/trivial', async (request) => ({ ok: true, size: JSON.stringify(request.body).length }));
const address = await app.listen({ host: '127.0.0.1', port: 0 });
process.stderr.write('listening on ' + address + '\\n');
`;

function start(args, cwd) {
  const child = spawn(process.execPath, args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
  return new Promise((resolve, reject) => {
    let err = '';
    child.stderr.on('data', (chunk) => {
      err += chunk;
      const match = /listening on (http:\/\/[0-9.:]+)/.exec(err);
      if (match) resolve({ child, url: match[1] });
    });
    child.once('exit', (code) => reject(new Error(`exited ${code}: ${err}`)));
  });
}

async function stop(child) {
  if (child.exitCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}

async function load(url, body, seconds) {
  const r = await autocannon({
    url,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
    connections,
    duration: seconds,
  });
  return {
    rps: r.requests.average,
    p50: r.latency.p50,
    p99: r.latency.p99,
    errors: r.non2xx + r.errors + r.timeouts,
  };
}

export async function run({ quick, log }) {
  const topology = layoutToYaml(generateLayout({ size: 100 }));
  const planBody = JSON.stringify({ topology });
  const stateDir = mkdtempSync(path.join(tmpdir(), 'cutover-server-bench-'));
  const rounds = quick ? 1 : 3;
  const seconds = quick ? 3 : 5;
  const cutover = await start(
    [
      path.join(repoRoot, 'bin/cutover.js'),
      'server',
      '--port',
      '0',
      '--state-dir',
      stateDir,
      '--rate-limit',
      '0',
      '--log-level',
      'warn',
    ],
    stateDir,
  );
  const trivial = await start(['--input-type=module', '-e', trivialServer], repoRoot);
  try {
    const results = { plan: [], trivial: [] };
    const planUrl = `${cutover.url}/v1/plan`;
    const trivialUrl = `${trivial.url}/trivial`;
    log(`warm-up (1 s each), then ${rounds} round(s) of ${seconds} s per target, ${connections} connections`);
    await load(planUrl, planBody, 1);
    await load(trivialUrl, planBody, 1);
    for (let round = 0; round < rounds; round++) {
      results.plan.push(await load(planUrl, planBody, seconds));
      results.trivial.push(await load(trivialUrl, planBody, seconds));
      log(
        `round ${round + 1}: plan ${results.plan[round].rps.toFixed(0)} req/s, trivial ${results.trivial[round].rps.toFixed(0)} req/s`,
      );
    }
    const summarize = (list, target) => ({
      target,
      rps: median(list.map((r) => r.rps)),
      p50: median(list.map((r) => r.p50)),
      p99: median(list.map((r) => r.p99)),
      errors: list.reduce((n, r) => n + r.errors, 0),
    });
    const plan = summarize(results.plan, 'POST /v1/plan, 100 components (cutover server)');
    const base = summarize(results.trivial, 'POST /trivial (bare Fastify, same body)');
    const ratio = plan.rps / base.rps;
    return {
      rows: [plan, base],
      goals: [
        recordedGoal({
          label: '/v1/plan throughput relative to a trivial Fastify route',
          value: ratio,
          detail: `p99 ${plan.p99} ms vs ${base.p99} ms`,
        }),
        strictGoal({
          label: 'failed /v1/plan requests',
          value: plan.errors,
          target: '= 0',
          pass: plan.errors === 0,
        }),
      ],
      notes: [
        `median of ${rounds} alternating round(s), ${connections} connections, ${seconds} s each; the server logs at warn and has no rate limit for this bench`,
        `the plan body is the topology as YAML text (${(planBody.length / 1024).toFixed(0)} KiB), planned against an empty state directory`,
      ],
    };
  } finally {
    await stop(cutover.child);
    await stop(trivial.child);
    rmSync(stateDir, { recursive: true, force: true });
  }
}
