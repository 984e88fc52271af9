/** `strategy.hooks`: the model, the defaults, and located errors for what is wrong. */
import { describe, expect, it } from 'vitest';
import { describeHookTarget, hooksShown } from '../../../core/topology/hook-types.js';
import { loadTopology } from '../../../core/topology/load-topology.js';
import { topologyText } from '../../../core/topology/render-topology.js';

const file = (hooks: string) => `apiVersion: cutover/v1
kind: Topology
metadata: { name: shop }
drivers: { apps: { type: process } }
components:
  api: { driver: apps, version: "1", run: { command: [node, api.js] } }
strategy:
  bake: 0s
  hooks:
${hooks}
`;

function load(hooks: string) {
  return loadTopology(file(hooks), { file: 'topology.yaml' });
}

function problems(hooks: string): string[] {
  const result = load(hooks);
  return result.ok ? [] : result.diagnostics.map((d) => `${d.line}:${d.column} ${d.path}: ${d.message}`);
}

describe('strategy.hooks', () => {
  it('normalises both kinds with their defaults: 30s, one retry, 1s between attempts', () => {
    const result = load(`    preRollout:
      - name: migrate-check
        command: [./check.sh, --fast]
        env: { TOKEN: { secret: CHECK_TOKEN }, MODE: strict }
    rollout:
      - name: smoke-test
        http:
          url: http://127.0.0.1:8089/check
          headers: { Authorization: { secret: SMOKE_TOKEN } }
          signingSecret: { secret: HOOK_KEY }
        timeout: 5s
        retries: 2
        retryDelay: 200ms`);
    expect(result.ok ? result.topology.strategy.hooks : result.diagnostics).toEqual({
      preRollout: [
        {
          command: ['./check.sh', '--fast'],
          env: { MODE: 'strict', TOKEN: { secret: 'CHECK_TOKEN' } },
          name: 'migrate-check',
          retries: 1,
          retryDelay: 1000,
          timeout: 30_000,
        },
      ],
      rollout: [
        {
          http: {
            headers: { Authorization: { secret: 'SMOKE_TOKEN' } },
            signingSecret: { secret: 'HOOK_KEY' },
            url: 'http://127.0.0.1:8089/check',
          },
          name: 'smoke-test',
          retries: 2,
          retryDelay: 200,
          timeout: 5000,
        },
      ],
    });
  });

  it('leaves the model as it was without hooks (an empty point included)', () => {
    const result = load('    rollout: []');
    expect(result.ok && result.topology.strategy).toEqual({ bake: 0, commit: 'auto' });
  });

  it('locates what the schema refuses by line, column and field', () => {
    expect(
      problems(`    rollout:
      - name: bad-url
        http: { url: "ftp://x", secret: k }
    postrollout: []`),
    ).toEqual([
      '12:22 strategy.hooks.rollout[0].http.url: must be an http:// or https:// URL',
      '12:33 strategy.hooks.rollout[0].http.secret: unknown key (allowed here: url, headers, signingSecret)',
      '13:5 strategy.hooks.postrollout: unknown key; did you mean "postRollout"? (allowed here: preRollout, rollout, confirmPromotion, postRollout)',
    ]);
  });

  it('locates what the checks beyond the schema refuse', () => {
    expect(
      problems(`    preRollout:
      - name: both
        http: { url: http://127.0.0.1:1/x }
        command: ["true"]
      - name: neither
        retries: 2
    rollout:
      - name: both
        command: ["true"]
        timeout: 0s
      - name: env-on-http
        http: { url: https://example.test/hook }
        env: { A: b }
        retryDelay: 25h`),
    ).toEqual([
      '11:9 strategy.hooks.preRollout[0]: has http and command; give exactly one',
      '14:9 strategy.hooks.preRollout[1]: needs what to call: http: { url: … } or command: [program, args…]',
      '17:15 strategy.hooks.rollout[0].name: repeats the name of strategy.hooks.preRollout[0]; give each hook its own name',
      '19:18 strategy.hooks.rollout[0].timeout: must be longer than 0s',
      '22:9 strategy.hooks.rollout[1].env: is for command hooks; an http hook takes http.headers',
      '23:21 strategy.hooks.rollout[1].retryDelay: is too long: at most 24h',
    ]);
  });
});

describe('strategy.hooks written back', () => {
  it('a recorded layout with hooks renders to a file that loads back to the same model', () => {
    const result = load(`    rollout:
      - name: smoke-test
        http:
          url: http://127.0.0.1:8089/check
          headers: { Authorization: { secret: SMOKE_TOKEN }, X-Team: shop }
          signingSecret: { secret: HOOK_KEY }
        retries: 0
    postRollout:
      - name: announce
        command: [./announce.sh]
        env: { TOKEN: { secret: T } }
        timeout: 1m30s
        retryDelay: 1s500ms`);
    if (!result.ok) throw new Error(JSON.stringify(result.diagnostics));
    const again = loadTopology(topologyText(result.topology, 'recorded layout'), { file: 'layout.json' });
    expect(again.ok ? again.topology : again.diagnostics).toEqual(result.topology);
  });

  it('takes a secret reference as an http hook url, kept by name and shown (sensitive)', () => {
    const result = load(`    rollout:
      - name: smoke
        http: { url: { secret: SMOKE_URL } }`);
    if (!result.ok) throw new Error(JSON.stringify(result.diagnostics));
    const hooks = result.topology.strategy.hooks ?? {};
    const hook = hooks.rollout?.[0];
    expect(hook).toMatchObject({ name: 'smoke', http: { url: { secret: 'SMOKE_URL' } } });
    expect(describeHookTarget(hook as NonNullable<typeof hook>)).toBe('POST (sensitive)');
    expect(hooksShown(hooks).rollout?.[0]).toMatchObject({ http: { url: { secret: 'SMOKE_URL' } } });
    // Written back as the file had it, so a recorded layout loads again.
    const again = loadTopology(topologyText(result.topology, 'recorded layout'), { file: 'layout.json' });
    expect(again.ok && again.topology.strategy.hooks).toEqual(hooks);
    // A reference is a secret's name, nothing else.
    expect(
      load(`    rollout:
      - name: smoke
        http: { url: { secret: 'SMOKE URL' } }`).ok,
    ).toBe(false);
  });
});
