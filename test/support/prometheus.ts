/**
 * A real Prometheus (Debian's `prometheus` package, installed by scripts/test-deps.mjs) for the
 * analysis tests: on a free port of 127.0.0.1, scraping one target every second, with its storage
 * in a temporary directory; killed by pid and its directory removed at cleanup.
 */
import { spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { freePort } from './migrations.js';
import { killChild } from './processes.js';
import type { Resources } from './resources.js';
import { eventually } from './wait.js';

/** Where Debian puts the binary. */
export const prometheusBinary = '/usr/bin/prometheus';
/** How often the test Prometheus scrapes its target. */
export const scrapeIntervalSeconds = 1;

export interface TestPrometheus {
  url: string;
  /** The first sample of an instant query, or undefined when it selects none. */
  query(promql: string): Promise<number | undefined>;
}

export async function startPrometheus(resources: Resources, target: string): Promise<TestPrometheus> {
  const dir = await resources.tempDir('cutover-prometheus-');
  const config = path.join(dir, 'prometheus.yml');
  await writeFile(
    config,
    [
      'global:',
      `  scrape_interval: ${scrapeIntervalSeconds}s`,
      `  evaluation_interval: ${scrapeIntervalSeconds}s`,
      'scrape_configs:',
      '  - job_name: cutover-router',
      `    static_configs: [{ targets: ['${target}'] }]`,
      '',
    ].join('\n'),
  );
  const listen = `127.0.0.1:${await freePort()}`;
  let output = '';
  const child = spawn(
    prometheusBinary,
    [
      `--config.file=${config}`,
      `--storage.tsdb.path=${path.join(dir, 'data')}`,
      `--web.listen-address=${listen}`,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  child.stdout?.on('data', (data: Buffer) => (output += data.toString()));
  child.stderr?.on('data', (data: Buffer) => (output += data.toString()));
  resources.add(() => killChild(child));
  const url = `http://${listen}`;
  await eventually(
    async () => {
      if (child.exitCode !== null) throw new Error(`prometheus exited (${child.exitCode}):\n${output}`);
      return (await fetch(`${url}/-/ready`).catch(() => null))?.status === 200;
    },
    30_000,
    () => output,
  );
  const query = async (promql: string): Promise<number | undefined> => {
    const answer = (await (
      await fetch(`${url}/api/v1/query?${new URLSearchParams({ query: promql })}`)
    ).json()) as {
      data?: { result?: { value: [number, string] }[] };
    };
    const first = answer.data?.result?.[0];
    return first ? Number(first.value[1]) : undefined;
  };
  return { url, query };
}
