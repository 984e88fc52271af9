/** The postgres driver's settings: the model, defaults, round trip, located errors. */
import { describe, expect, it } from 'vitest';
import { loadTopology } from '../../../core/topology/load-topology.js';
import { topologyText } from '../../../core/topology/render-topology.js';

const file = (
  driver: string,
  db = '    driver: pg\n    version: "15"\n    stateful: true',
) => `apiVersion: cutover/v1
kind: Topology
metadata: { name: shop }
drivers:
  pg:
${driver}
components:
  db:
${db}
`;

function problems(driver: string, db?: string): string[] {
  const result = loadTopology(file(driver, db), { file: 'topology.yaml' });
  return result.ok ? [] : result.diagnostics.map((d) => `${d.line} ${d.path}: ${d.message}`);
}

describe('postgres driver fields', () => {
  it('normalise with the default database and role, and render back to the same model', () => {
    const full = loadTopology(
      file(
        '    type: postgres\n    database: shop\n    user: shop_app\n    bin: /opt/pg/bin\n    runAs: pgrunner\n    init: db/schema.sql',
      ),
      { file: 't' },
    );
    if (!full.ok) throw new Error(JSON.stringify(full.diagnostics));
    expect(full.topology.drivers.pg).toEqual({
      bin: '/opt/pg/bin',
      database: 'shop',
      init: 'db/schema.sql',
      runAs: 'pgrunner',
      type: 'postgres',
      user: 'shop_app',
    });
    const again = loadTopology(topologyText(full.topology, 'recorded'), { file: 'recorded' });
    expect(again.ok && again.topology).toEqual(full.topology);

    const minimal = loadTopology(file('    type: postgres'), { file: 't' });
    if (!minimal.ok) throw new Error(JSON.stringify(minimal.diagnostics));
    expect(minimal.topology.drivers.pg).toEqual({ database: 'app', type: 'postgres', user: 'app' });
  });

  it('refuses, by line and field: names PostgreSQL reserves or cannot take, unknown keys, several replicas', () => {
    expect(
      problems('    type: postgres\n    user: postgres\n    database: 1shop\n    port: 5432', undefined),
    ).toEqual([
      '7 drivers.pg.user: must be a PostgreSQL name: lower-case letters, digits and _ (at most 63), not starting with a digit, neither pg_… nor postgres',
      '8 drivers.pg.database: must be a PostgreSQL name: lower-case letters, digits and _ (at most 63), not starting with a digit, neither pg_… nor postgres',
      '9 drivers.pg.port: unknown key (allowed here: type, runsOn, database, user, bin, runAs, init)',
    ]);
    expect(problems('    type: postgres', '    driver: pg\n    version: "15"\n    replicas: 2')).toEqual([
      '11 components.db.replicas: must be 1 for a component on a postgres driver (one cluster per slot)',
    ]);
  });
});
