/**
 * The router before and after a change, side by side with nginx, in the same rounds: CPU per
 * request at 3,000 requests/s (user + system from /proc) and autocannon throughput, each proxy in
 * turn, and the median of the per-round ratios to nginx. The "before" is another checkout of the
 * repository, built (`npm run build`), e.g. `git archive <commit> | tar -x -C /tmp/before`, with a
 * node_modules link. Not part of `npm run bench`: for a change to the router's request path.
 *
 *   node bench/router-before-after.js <before checkout> [rounds, default 5]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createNginxDriver } from '../dist/engine/drivers/nginx-driver.js';
import { createRouteTableDriver } from '../dist/engine/drivers/router-driver.js';
import { StateDir } from '../dist/engine/store/state-dir.js';
import * as support from './router-support.js';
import { freePort, median } from './support.js';

const worktree = fileURLToPath(new URL('..', import.meta.url));
const [oldTree, roundsArg] = process.argv.slice(2);
if (!oldTree) throw new Error('usage: node bench/router-before-after.js <before checkout> [rounds]');
const rounds = Number(roundsArg ?? 5);

const dir = mkdtempSync(join(tmpdir(), 'router-before-after-'));
const owned = support.ownedProcesses();
const log = () => {};
try {
  const appPort = await freePort();
  owned.start(process.execPath, [join(worktree, 'examples/app/server.js')], {
    env: { ...process.env, PORT: String(appPort), VERSION: 'bench' },
  });
  const app = `127.0.0.1:${appPort}`;
  await support.waitAnswers(app);
  const routers = {};
  for (const [key, tree] of [
    ['old', oldTree],
    ['new', worktree],
  ]) {
    const listen = `127.0.0.1:${await freePort()}`;
    const stateDir = join(dir, key);
    await support.setRoute(
      createRouteTableDriver(),
      { stateDir: StateDir.at(stateDir), baseDir: stateDir },
      listen,
      app,
    );
    const child = owned.start(process.execPath, [
      join(tree, 'bin/cutover.js'),
      'proxy',
      '--state-dir',
      stateDir,
    ]);
    await support.waitAnswers(listen);
    routers[key] = { address: listen, pids: () => [child.pid] };
  }
  const nginxListen = `127.0.0.1:${await freePort()}`;
  const nginx = await support.startNginx(join(dir, 'nginx'), owned);
  await support.setRoute(createNginxDriver(), nginx.ctx, nginxListen, app);
  const configFile = join(nginx.dir, 'routes.conf');
  const generated = await readFile(configFile, 'utf8');
  await writeFile(configFile, generated.replaceAll(/^\s*keepalive_timeout 0;.*\n/gm, ''));
  await nginx.reload();
  const targets = {
    ...routers,
    nginx: { address: nginxListen, pids: () => support.childPids(nginx.masterPid) },
  };
  for (const key of Object.keys(targets))
    await support.cannon(`warm ${key}`, targets[key].address, log, 3, 0);
  const cpu = { old: [], new: [], nginx: [] };
  const tput = { old: [], new: [], nginx: [] };
  const loads = [];
  for (let round = 1; round <= rounds; round++) {
    loads.push(loadavg()[0]);
    for (const key of Object.keys(targets)) {
      const r = await support.cpuPerRequest(targets[key].address, targets[key].pids, 4);
      cpu[key].push(r);
    }
    for (const key of Object.keys(targets)) {
      const r = await support.cannon(`t ${key}`, targets[key].address, log, 2, 0);
      tput[key].push(r);
    }
    const line = Object.keys(targets)
      .map(
        (k) =>
          `${k} ${cpu[k].at(-1).total.toFixed(1)}µs(${cpu[k].at(-1).system.toFixed(1)}) ${tput[k].at(-1).reqPerSec.toFixed(0)}/s f${cpu[k].at(-1).failed + tput[k].at(-1).failed}`,
      )
      .join(' | ');
    console.log(`round ${round} load ${loads.at(-1).toFixed(1)}: ${line}`);
  }
  const med = (list) => median(list);
  for (const key of Object.keys(targets))
    console.log(
      `${key}: cpu median ${med(cpu[key].map((r) => r.total)).toFixed(1)} µs (system ${med(cpu[key].map((r) => r.system)).toFixed(1)}), throughput median ${med(tput[key].map((r) => r.reqPerSec)).toFixed(0)}/s`,
    );
  for (const key of ['old', 'new']) {
    const cpuRatios = cpu[key].map((r, i) => r.total / cpu.nginx[i].total);
    const tRatios = tput[key].map((r, i) => r.reqPerSec / tput.nginx[i].reqPerSec);
    console.log(
      `${key}/nginx: cpu ratio median ${med(cpuRatios).toFixed(2)} [${cpuRatios.map((x) => x.toFixed(2)).join(' ')}], throughput ratio median ${med(tRatios).toFixed(2)} [${tRatios.map((x) => x.toFixed(2)).join(' ')}]`,
    );
  }
  console.log(`load averages at round starts: ${loads.map((l) => l.toFixed(1)).join(', ')}`);
} finally {
  await owned.stopAll();
  rmSync(dir, { recursive: true, force: true });
}
