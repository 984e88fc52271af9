/** `env` values may reference secrets: `{ secret: NAME }`, checked with located errors. */
import { describe, expect, it } from 'vitest';
import { loadTopology } from '../../../core/topology/load-topology.js';

const file = (env: string) => `apiVersion: cutover/v1
kind: Topology
metadata: { name: shop }
drivers: { apps: { type: process } }
components:
  api:
    driver: apps
    version: "1"
    run: { command: [node, api.js] }
    env:
${env}
`;

function problems(env: string): string[] {
  const result = loadTopology(file(env), { file: 'topology.yaml' });
  return result.ok ? [] : result.diagnostics.map((d) => `${d.line}:${d.column} ${d.path}: ${d.message}`);
}

describe('secret references in env', () => {
  it('accepts { secret: NAME } beside plain values', () => {
    expect(problems('      DB_PASSWORD: { secret: DB_PASSWORD }\n      LOG_LEVEL: info')).toEqual([]);
  });

  it('refuses a bad name, an unknown key and a missing name, each located', () => {
    expect(problems('      DB_PASSWORD: { secret: 9lives }')).toEqual([
      '11:30 components.api.env.DB_PASSWORD.secret: secret names are letters, digits and _, not starting with a digit',
    ]);
    expect(problems('      DB_PASSWORD: { secret: X, value: hunter2 }')).toEqual([
      expect.stringMatching(
        /^11:\d+ components\.api\.env\.DB_PASSWORD\.value: unknown key \(allowed here: secret\)$/,
      ),
    ]);
    expect(problems('      DB_PASSWORD: { name: X }')).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/components\.api\.env\.DB_PASSWORD\.secret: is required$/),
      ]),
    );
    expect(problems('      DB_PASSWORD: [hunter2]')).toEqual([
      expect.stringMatching(/components\.api\.env\.DB_PASSWORD: must be a string$/),
    ]);
  });
});
