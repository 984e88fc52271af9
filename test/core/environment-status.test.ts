import { describe, expect, it } from 'vitest';
import { migrationInFlightOf, statusOf, summaryOfStatus } from '../../core/environment-status.js';
import type { CurrentLayout } from '../../core/layout.js';
import { start } from '../../core/migration/step.js';
import { summaryOf } from '../../core/migration/summary.js';
import type { ObservedLayout } from '../../core/observed.js';
import { renderStatusLine, renderStatusText } from '../../views/render-status.js';
import { plainStyle } from '../../views/style.js';
import { load, shopDoc } from '../support/builders.js';
import { bumpSpec } from '../support/migration-builders.js';

const layout: CurrentLayout = {
  environment: 'shop',
  serial: 4,
  topology: load(shopDoc()),
  committedAt: '2026-11-25T10:00:00.000Z',
  slots: {},
};

function observed(
  apiStates: ('running' | 'not_running')[],
  route: 'served' | 'not_served' | 'unknown',
): ObservedLayout {
  return {
    environment: 'shop',
    observedAt: '2026-11-25T10:05:00.000Z',
    components: {
      api: {
        component: 'api',
        slot: 'blue',
        version: '2.0.0',
        replicas: apiStates.map((state, i) => ({ address: `127.0.0.1:4000${i}`, pid: 100 + i, state })),
      },
      db: { component: 'db', slot: 'blue', version: '15', replicas: [{ address: null, state: 'unknown' }] },
    },
    routes: {
      public: { route: 'public', listen: '127.0.0.1:18080', state: route, greenPercent: 0, inFlight: 3 },
    },
  };
}

const driftIn = (o: ObservedLayout) =>
  statusOf({ layout, observed: o, health: new Map(), migration: null }).drift;

describe('environment status', () => {
  it('names dead replicas and a route not served as drift; unknown is never drift', () => {
    expect(driftIn(observed(['not_running', 'not_running'], 'not_served'))).toEqual([
      { kind: 'component', name: 'api', reason: '2 of 2 replicas not running' },
      { kind: 'route', name: 'public', reason: 'route not served' },
    ]);
    expect(driftIn(observed(['running', 'running'], 'unknown'))).toEqual([]);
  });

  it('puts the record, the observation, health and the migration together', () => {
    const health = new Map([['127.0.0.1:40000', { result: 'ok' as const, summary: 'GET /healthz 200' }]]);
    const status = statusOf({
      layout,
      observed: observed(['running', 'not_running'], 'served'),
      health,
      migration: { id: 'mig_1', status: 'running (bake)', runner: 'alive' },
    });
    const api = status.components.find((c) => c.name === 'api');
    expect(api?.replicas).toEqual([
      {
        address: '127.0.0.1:40000',
        pid: 100,
        state: 'running',
        detail: null,
        health: { result: 'ok', summary: 'GET /healthz 200' },
      },
      {
        address: '127.0.0.1:40001',
        pid: 101,
        state: 'not_running',
        detail: null,
        health: { result: 'not_probed', summary: 'not probed' },
      },
    ]);
    expect(status.routes).toEqual([
      {
        name: 'public',
        listen: '127.0.0.1:18080',
        to: 'web',
        state: 'served',
        weights: { blue: 100, green: 0 },
        inFlight: 3,
        detail: null,
      },
    ]);
    expect(status.drift).toEqual([{ kind: 'component', name: 'api', reason: '1 of 2 replicas not running' }]);
    expect(summaryOfStatus(status)).toEqual({
      environment: 'shop',
      serial: 4,
      committedAt: '2026-11-25T10:00:00.000Z',
      components: 4,
      routes: 1,
      migration: { id: 'mig_1', status: 'running (bake)', runner: 'alive' },
      drift: 1,
    });
  });

  it('renders as text (no colour with the plain style) and as a plain line', () => {
    const status = statusOf({
      layout,
      observed: observed(['not_running', 'not_running'], 'served'),
      health: new Map(),
      migration: null,
    });
    const text = renderStatusText(status, plainStyle);
    expect(text.includes('\u001b[')).toBe(false);
    expect(text).toContain('api  2.0.0  slot blue  0/2 running\n');
    // A replica its driver cannot observe (an exec driver without an observe script) is not a
    // replica down: counted apart.
    expect(text).toContain('db  15  slot blue  0/1 running, 1 unknown\n');
    expect(text).toMatch(/127\.0\.0\.1:40000\s+pid 100\s+not running/);
    expect(text).toContain('public  127.0.0.1:18080 → web  blue 100% / green 0%  in flight 3  served');
    expect(text).toContain('Drift (1):\n  ! component api: 2 of 2 replicas not running');
    expect(renderStatusLine(status)).toContain('drift: component api: 2 of 2 replicas not running');
  });

  it('shows the last analysis of a hold with the migration in flight', () => {
    const analysis = {
      outcome: 'breach' as const,
      weight: 10,
      reason: 'green 5xx 4.2 % > 1 % over 512 requests at the 10 % step',
    };
    const status = statusOf({
      layout,
      observed: observed(['running', 'running'], 'served'),
      health: new Map(),
      migration: migrationInFlightOf({
        ...summaryOf(start(bumpSpec()).state),
        analysis,
      }),
    });
    expect(status.migration?.analysis).toEqual(analysis);
    expect(renderStatusText(status, plainStyle)).toContain(
      '  analysis:   breach at 10 %: green 5xx 4.2 % > 1 % over 512 requests at the 10 % step',
    );
  });
});
