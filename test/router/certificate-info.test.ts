/**
 * What the router tells of the certificates it serves: `GET /routes` (names, file, notAfter,
 * fingerprint, when loaded, the last load's problem), `/metrics` (expiry and failed loads, checked
 * by promtool) and `cutover proxy routes`. One router in this process, one TLS route with two
 * certificates chosen by SNI (one expiring in 2 days, one in 90), made with openssl at test time.
 */
import { execFile, execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { type PeerCertificate, connect as tlsConnect } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { certificateMetricsText } from '../../router/certificate-metrics.js';
import { routerClient } from '../../router/client.js';
import type { RouteCertificatesInfo, ServedCertificateInfo } from '../../router/control-types.js';
import type { Router } from '../../router/router.js';
import { fingerprintOf, makeCertificate, type TestCertificate } from '../support/certificates.js';
import { repoRoot, runCli } from '../support/cli.js';
import { Resources } from '../support/resources.js';
import {
  environment,
  eventually,
  freeListen,
  recordingUpstream,
  setRoute,
  startTestRouter,
  stateDirFor,
} from './support.js';

const resources = new Resources();
afterAll(() => resources.cleanup());

const key = `${environment}/web`;
let dir: string;
let listen: string;
/** Expires in 2 days: flagged. */
let a: TestCertificate;
/** Expires in 90 days. */
let b: TestCertificate;
let router: Router;
/** The exposition while b's file was broken (the docs' alert rules are tried on it). */
let brokenExposition = '';

beforeAll(async () => {
  dir = await stateDirFor(resources);
  a = makeCertificate(dir, 'a', ['a.test', '*.a.test'], 2);
  b = makeCertificate(dir, 'b', ['b.test'], 90);
  const upstream = await recordingUpstream(resources, 'up');
  listen = await freeListen();
  await setRoute(dir, 'web', {
    blue: [upstream.address],
    green: [],
    greenPercent: 0,
    listen,
    tls: {
      certificates: [a, b].map(({ cert, key }) => ({ cert, key })),
      minVersion: 'TLSv1.2',
      http2: true,
    },
  });
  ({ router } = await startTestRouter(resources, dir));
});

/** The certificate the router shows a client asking for SNI `servername`. */
function served(servername: string): Promise<PeerCertificate> {
  const [host, port] = listen.split(':') as [string, string];
  return new Promise((resolve, reject) => {
    const socket = tlsConnect({ host, port: Number(port), servername, rejectUnauthorized: false }, () => {
      resolve(socket.getPeerCertificate());
      socket.end();
    });
    socket.on('error', reject);
  });
}

async function tlsOfRoute(): Promise<RouteCertificatesInfo> {
  const tls = (await routerClient(dir).routes()).routes[key]?.tls;
  if (!tls) throw new Error(`no tls in the router's /routes for ${key}`);
  return tls;
}

const notAfterOf = (file: string) => new Date(new X509Certificate(readFileSync(file)).validTo).toISOString();

async function metricsText(): Promise<string> {
  return (await fetch(`http://127.0.0.1:${router.controlPort}/metrics`)).text();
}

/** The value of one series, e.g. `cutover_router_certificate_load_failing{…}`. */
function sample(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  if (!line) throw new Error(`no ${series} in:\n${text}`);
  return Number(line.slice(series.length + 1));
}

const routeLabels = `environment="${environment}",route="web"`;
const expirySeries = (name: string, file: string) =>
  `cutover_router_certificate_expiry_timestamp_seconds{${routeLabels},name="${name}",file="${file}"}`;
const failing = `cutover_router_certificate_load_failing{${routeLabels}}`;
const failures = `cutover_router_certificate_load_failures_total{${routeLabels}}`;

/** `promtool check metrics` on the exposition: its exit code and what it said. */
function promtoolCheck(text: string): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    const child = execFile('promtool', ['check', 'metrics'], (error, stdout, stderr) =>
      resolve({ code: error ? Number(error.code ?? 1) : 0, output: `${stdout}${stderr}` }),
    );
    child.stdin?.end(text);
  });
}

/** A new self-signed certificate for `name` with the key in `keyFile`, valid `days`. */
function certificateOfKey(
  keyFile: string,
  name: string,
  days: number,
): { cert: string; fingerprint: string } {
  const cert = path.join(dir, `${name}-renewed.pem`);
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-key',
      keyFile,
      '-out',
      cert,
      '-subj',
      `/CN=${name}`,
      '-addext',
      `subjectAltName=DNS:${name}`,
      '-days',
      String(days),
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  return { cert, fingerprint: fingerprintOf(cert) };
}

/** Replaces `file` whole (written aside, renamed into place), as the docs ask of a rotation. */
function replaceFile(file: string, content: string | Buffer): void {
  writeFileSync(`${file}.tmp`, content);
  renameSync(`${file}.tmp`, file);
}

describe('certificates in GET /routes and /metrics', () => {
  it('tells each certificate served: names, file, notAfter, fingerprint, and when loaded', async () => {
    const tls = await tlsOfRoute();
    expect(tls.certificates).toEqual([
      {
        names: ['a.test', '*.a.test'],
        file: a.cert,
        notBefore: expect.any(String),
        notAfter: notAfterOf(a.cert),
        fingerprint256: a.fingerprint,
      },
      {
        names: ['b.test'],
        file: b.cert,
        notBefore: expect.any(String),
        notAfter: notAfterOf(b.cert),
        fingerprint256: b.fingerprint,
      },
    ]);
    // The fingerprints are those a client sees for each SNI name.
    expect((await served('www.a.test')).fingerprint256).toBe(tls.certificates[0]?.fingerprint256);
    expect((await served('b.test')).fingerprint256).toBe(tls.certificates[1]?.fingerprint256);
    expect(Date.now() - Date.parse(tls.loadedAt ?? '')).toBeLessThan(60_000);
    expect(tls.problem).toBeUndefined();
    expect(tls.failedLoads).toBe(0);
  });

  it('serves their expiry as Unix seconds, and no failed load, in an exposition promtool parses', async () => {
    const text = await metricsText();
    expect(sample(text, expirySeries('a.test', a.cert))).toBe(Date.parse(notAfterOf(a.cert)) / 1000);
    expect(sample(text, expirySeries('b.test', b.cert))).toBe(Date.parse(notAfterOf(b.cert)) / 1000);
    expect(text).toContain('# TYPE cutover_router_certificate_expiry_timestamp_seconds gauge');
    expect(sample(text, failing)).toBe(0);
    expect(sample(text, failures)).toBe(0);
    const check = await promtoolCheck(text);
    expect(check.output).toBe('');
    expect(check.code).toBe(0);
  });

  it('a pair listed twice gives one expiry series, so the scrape stays valid', async () => {
    const tls = await tlsOfRoute();
    const first = tls.certificates[0] as ServedCertificateInfo;
    const text = certificateMetricsText([
      { route: key, certificates: [first, first], failing: false, failedLoads: 0 },
    ]);
    expect(text.split('\n').filter((l) => l.startsWith('cutover_router_certificate_expiry_'))).toHaveLength(
      1,
    );
    expect(await promtoolCheck(text)).toEqual({ code: 0, output: '' });
  });

  it('cutover proxy routes shows the expiry short and flags the certificate expiring within 14 days', async () => {
    const result = await runCli(['proxy', 'routes', '--state-dir', dir]);
    expect(result.code).toBe(0);
    const lines = result.stdout.split('\n');
    const lineOf = (name: string) => lines.find((l) => l.trimStart().startsWith(name)) ?? '';
    expect(lineOf('a.test, *.a.test')).toContain(`until ${notAfterOf(a.cert).slice(0, 10)} (1 day left)`);
    expect(lineOf('a.test, *.a.test')).toContain('! expires within 14 days');
    expect(lineOf('a.test, *.a.test')).toContain(a.cert);
    expect(lineOf('b.test')).toMatch(/until \d{4}-\d\d-\d\d \((89|90) days left\)/);
    expect(lineOf('b.test')).not.toContain('!');
    expect(result.stdout).not.toContain('failed');
  });

  it('a file replaced by a broken one: the old certificate is still served and the problem shown; a good one then shows its notAfter', async () => {
    const before = await tlsOfRoute();
    replaceFile(b.cert, 'not a certificate\n');
    await eventually(async () => (await tlsOfRoute()).problem !== undefined, 5_000);
    const broken = await tlsOfRoute();
    expect(broken.problem).toContain(`${b.cert} holds no PEM certificate`);
    expect(Date.parse(broken.failedAt ?? '')).toBeGreaterThanOrEqual(Date.parse(before.loadedAt ?? ''));
    expect(broken.failedLoads).toBe(1);
    expect(broken.certificates).toEqual(before.certificates);
    expect(broken.loadedAt).toBe(before.loadedAt);
    expect((await served('b.test')).fingerprint256).toBe(b.fingerprint);
    let text = await metricsText();
    brokenExposition = text;
    expect(sample(text, failing)).toBe(1);
    expect(sample(text, failures)).toBe(1);
    const servedNotAfter = before.certificates[1]?.notAfter ?? '';
    expect(sample(text, expirySeries('b.test', b.cert))).toBe(Date.parse(servedNotAfter) / 1000);
    const view = await runCli(['proxy', 'routes', '--state-dir', dir]);
    expect(view.stdout).toContain(
      `! reload failed at ${broken.failedAt?.replace('T', ' ').slice(0, 19)} UTC: ${b.cert} holds no PEM certificate`,
    );
    expect(view.stdout).toContain('the certificates above, loaded before, are still served');

    // A good certificate of the same key, valid 30 days, replaces the broken file.
    const next = certificateOfKey(b.key, 'b.test', 30);
    replaceFile(b.cert, readFileSync(next.cert));
    await eventually(async () => (await tlsOfRoute()).problem === undefined, 5_000);
    const renewed = await tlsOfRoute();
    expect(renewed.certificates[1]).toMatchObject({
      names: ['b.test'],
      file: b.cert,
      notAfter: notAfterOf(next.cert),
      fingerprint256: next.fingerprint,
    });
    expect(renewed.failedLoads).toBe(1);
    expect(renewed.failedAt).toBeUndefined();
    expect(Date.parse(renewed.loadedAt ?? '')).toBeGreaterThan(Date.parse(before.loadedAt ?? ''));
    expect((await served('b.test')).fingerprint256).toBe(next.fingerprint);
    text = await metricsText();
    expect(sample(text, expirySeries('b.test', b.cert))).toBe(Date.parse(notAfterOf(next.cert)) / 1000);
    expect(sample(text, failing)).toBe(0);
    expect(sample(text, failures)).toBe(1);
    const after = await runCli(['proxy', 'routes', '--state-dir', dir]);
    expect(after.stdout).not.toContain('failed');
    expect(after.stdout).toMatch(/b\.test +until \d{4}-\d\d-\d\d \((29|30) days left\)/);
  });

  it("docs/router.md's alert rules fire on this exposition: the 2-day certificate, and the failing reload", async () => {
    const soon = { alertname: 'CertificateExpiresSoon', labels: { name: 'a.test', file: a.cert } };
    const failingReload = { alertname: 'CertificateReloadFailing', labels: {} };
    expect(await rulesOn(brokenExposition, [soon, failingReload])).toContain('SUCCESS');
    expect(await rulesOn(await metricsText(), [soon])).toContain('SUCCESS');
  });
});

/** An alert expected to fire: its name and the labels of the series beside environment and route. */
interface ExpectedAlert {
  alertname: string;
  labels: Record<string, string>;
}

/**
 * `promtool test rules` of docs/router.md's rule file on `exposition`'s certificate series, 15
 * minutes on, expecting exactly `firing` of its alerts (each rule's other alerts: none). Its clock
 * starts at 0, so each expiry is given as seconds from now. The annotations are checked by
 * `promtool check rules` and left out of the test (promtool compares them whole).
 */
async function rulesOn(exposition: string, firing: readonly ExpectedAlert[]): Promise<string> {
  const docs = readFileSync(path.join(repoRoot, 'docs/router.md'), 'utf8');
  const block = /\n {2}```yaml\n( {2}groups:[\s\S]*?)\n {2}```\n/.exec(docs)?.[1];
  if (!block) throw new Error('no alert rules in docs/router.md');
  const work = await resources.tempDir('cutover-rules-');
  const rules = parse(block.replace(/^ {2}/gm, '')) as { groups: { rules: Record<string, unknown>[] }[] };
  writeFileSync(path.join(work, 'documented.yml'), stringify(rules));
  const checked = await promtool(['check', 'rules', path.join(work, 'documented.yml')]);
  if (!checked.includes('SUCCESS')) return checked;
  for (const group of rules.groups) for (const rule of group.rules) delete rule.annotations;
  writeFileSync(path.join(work, 'rules.yml'), stringify(rules));
  const nowSeconds = Date.now() / 1000;
  const series = exposition
    .split('\n')
    .filter((line) => line.startsWith('cutover_router_certificate_'))
    .map((line) => {
      const name = line.slice(0, line.lastIndexOf(' '));
      const value = Number(line.slice(line.lastIndexOf(' ') + 1));
      const shifted = name.includes('_expiry_') ? Math.round(value - nowSeconds) : value;
      return { series: name, values: `${shifted}x30` };
    });
  const alertnames = rules.groups.flatMap((g) => g.rules.map((r) => String(r.alert)));
  const alertRuleTest = alertnames.map((alertname) => ({
    eval_time: '15m',
    alertname,
    exp_alerts: firing
      .filter((f) => f.alertname === alertname)
      .map((f) => ({
        exp_labels: { severity: 'warning', environment, route: 'web', ...f.labels },
      })),
  }));
  const tests = {
    rule_files: ['rules.yml'],
    evaluation_interval: '1m',
    tests: [{ interval: '1m', input_series: series, alert_rule_test: alertRuleTest }],
  };
  writeFileSync(path.join(work, 'tests.yml'), JSON.stringify(tests));
  return promtool(['test', 'rules', path.join(work, 'tests.yml')]);
}

/** What promtool said, whatever its exit code. */
function promtool(args: string[]): Promise<string> {
  return new Promise((resolve) =>
    execFile('promtool', args, (_error, stdout, stderr) => resolve(`${stdout}${stderr}`)),
  );
}
