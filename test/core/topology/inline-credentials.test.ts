/**
 * A hook's or a notify target's URL written with a credential in it is refused where it is written
 * (issue 26, item 8): the topology that runs is recorded as written, so it would be kept in files.
 */
import { describe, expect, it } from 'vitest';
import { loadTopology } from '../../../core/topology/load-topology.js';

const file = (notifyUrl: string, hookUrl: string, headers = '{}') => `apiVersion: cutover/v1
kind: Topology
metadata: { name: shop }
drivers: { apps: { type: process } }
components:
  api: { driver: apps, version: "1", run: { command: [node, api.js] } }
notify:
  ops: { type: webhook, url: ${notifyUrl}, signingSecret: { secret: KEY } }
strategy:
  hooks:
    rollout:
      - name: smoke
        http: { url: ${hookUrl}, headers: ${headers} }
`;

function problems(notifyUrl: string, hookUrl = '"https://ci.example/smoke"', headers?: string): string[] {
  const result = loadTopology(file(notifyUrl, hookUrl, headers), { file: 'topology.yaml' });
  return result.ok ? [] : result.diagnostics.map((d) => `${d.line}:${d.column} ${d.path}: ${d.message}`);
}

describe('credentials written in a URL', () => {
  it('are refused in a notify URL and a hook URL, located, pointing at a secret reference', () => {
    expect(problems('"https://ops:hunter2@hooks.example/x"', '"https://ci.example/smoke?token=abc"')).toEqual(
      [
        '8:30 notify.ops.url: holds a credential in plain text (its user info), which the record of the topology would keep; write url: { secret: NAME } and set NAME where migrations run ($CUTOVER_SECRET_NAME or the secrets file)',
        '13:22 strategy.hooks.rollout[0].http.url: holds a credential in plain text (its query parameter token), which the record of the topology would keep; write url: { secret: NAME } and set NAME where migrations run ($CUTOVER_SECRET_NAME or the secrets file)',
      ],
    );
  });

  it.each([
    ['"https://u:p@h.example/x"', 'its user info'],
    ['"https://u@h.example/x"', 'its user info'],
    ['"https://h.example/x?a=1&api_key=k"', 'its query parameter api_key'],
    ['"https://h.example/x?password=p&sig=s"', 'its query parameter password, its query parameter sig'],
    ['"https://h.example/x?signature=s"', 'its query parameter signature'],
    ['"https://h.example/x?secret=s"', 'its query parameter secret'],
    ['"https://hooks.slack.com/services/T0/B0/XyZ"', 'its Slack webhook path'],
  ])('names what of %s is a credential', (url, what) => {
    expect(problems(url)).toEqual([expect.stringContaining(`(${what})`)]);
  });

  it('lets through a URL without one, and a secret reference', () => {
    expect(problems('"https://hooks.example/cutover?team=ops&monkey=1"')).toEqual([]);
    expect(problems('{ secret: OPS_URL }', '{ secret: SMOKE_URL }')).toEqual([]);
  });

  it('are refused in an http hook header written in plain text, by its name or its value', () => {
    const ok = '"https://ci.example/smoke"';
    const hookHeaders = (h: string) => problems(ok, ok, h);
    expect(hookHeaders('{ Authorization: "Bearer abcdefgh12345" }')).toEqual([
      '13:76 strategy.hooks.rollout[0].http.headers.Authorization: holds a credential in plain text (its name Authorization, a bearer credential in its value), which the record of the topology would keep; write Authorization: { secret: NAME } and set NAME where migrations run ($CUTOVER_SECRET_NAME or the secrets file)',
    ]);
    expect(hookHeaders('{ X-Api-Key: k1 }')).toEqual([expect.stringContaining('(its name X-Api-Key)')]);
    expect(hookHeaders('{ X-Forward: "Basic dXNlcjpwYXNzd29yZA==" }')).toEqual([
      expect.stringContaining('(a basic credential in its value)'),
    ]);
    expect(
      hookHeaders('{ Authorization: { secret: SMOKE_TOKEN }, X-Team: ops, Accept: application/json }'),
    ).toEqual([]);
  });
});
