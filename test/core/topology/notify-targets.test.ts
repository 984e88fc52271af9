/** `notify:` targets in the topology: loaded into the model, bad values refused with their place. */
import { describe, expect, it } from 'vitest';
import { loadTopology } from '../../../core/topology/load-topology.js';
import { topologyText } from '../../../core/topology/render-topology.js';

const file = (notify: string) => `apiVersion: cutover/v1
kind: Topology
metadata: { name: shop }
drivers: { apps: { type: process } }
components:
  api: { driver: apps, version: "1", run: { command: [node, api.js] } }
notify:
${notify}
`;

function problems(notify: string): string[] {
  const result = loadTopology(file(notify), { file: 'topology.yaml' });
  return result.ok ? [] : result.diagnostics.map((d) => `${d.line}:${d.column} ${d.path}: ${d.message}`);
}

describe('notify targets', () => {
  it('loads webhook, slack and command targets with their defaults, and renders them back', () => {
    const result = loadTopology(
      file(`  ops:
    type: webhook
    url: http://127.0.0.1:9000/hook
    signingSecret: { secret: HOOK_KEY }
    severity: warning
    events: [failed, completed]
  chat: { type: slack, url: { secret: SLACK_URL } }
  page: { type: command, command: [./page.sh, --now], timeout: 2s, retries: 0 }`),
      { file: 'topology.yaml' },
    );
    if (!result.ok) throw new Error(JSON.stringify(result.diagnostics));
    expect(result.topology.notify).toEqual({
      chat: { retries: 3, severity: 'info', timeout: 5_000, type: 'slack', url: { secret: 'SLACK_URL' } },
      ops: {
        events: ['completed', 'failed'],
        retries: 3,
        severity: 'warning',
        signingSecret: { secret: 'HOOK_KEY' },
        timeout: 5_000,
        type: 'webhook',
        url: 'http://127.0.0.1:9000/hook',
      },
      page: {
        command: ['./page.sh', '--now'],
        retries: 0,
        severity: 'info',
        timeout: 2_000,
        type: 'command',
      },
    });
    const again = loadTopology(topologyText(result.topology, 'x'), { file: 'x' });
    expect(again.ok && again.topology).toEqual(result.topology);
  });

  it('a topology without notify has none in its model (older plans keep their ids)', () => {
    const result = loadTopology(file('').replace('notify:\n', ''), { file: 'topology.yaml' });
    expect(result.ok && 'notify' in result.topology).toBe(false);
  });

  it('refuses an unknown event, a bad severity, a webhook without its signing secret or with an inline one, each located', () => {
    expect(problems('  ops: { type: slack, url: "http://h/x", events: [finished] }')).toEqual([
      expect.stringMatching(/^8:\d+ notify\.ops\.events\[0\]: must be one of: started/),
    ]);
    expect(problems('  ops: { type: slack, url: "http://h/x", severity: loud }')).toEqual([
      expect.stringMatching(/^8:\d+ notify\.ops\.severity: must be one of: info, warning, error/),
    ]);
    expect(problems('  ops: { type: webhook, url: "http://h/x" }')).toEqual([
      expect.stringMatching(/^8:\d+ notify\.ops\.signingSecret: is required$/),
    ]);
    expect(problems('  ops: { type: webhook, url: "http://h/x", signingSecret: hunter2 }')).toEqual([
      expect.stringMatching(/^8:\d+ notify\.ops\.signingSecret: /),
    ]);
    expect(problems('  ops: { type: slack, url: "ftp://h/x" }')).toEqual([
      expect.stringMatching(/^8:\d+ notify\.ops\.url: /),
    ]);
  });
});
