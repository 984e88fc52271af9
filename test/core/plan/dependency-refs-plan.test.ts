/**
 * Plans of components whose `env` refers to a dependency: a component kept as it is is replaced
 * when a dependency it refers to is (its green gets the new address; its blue would point at a
 * slot the commit retires), and says so; a reference shows like any other value, in every format.
 */
import { describe, expect, it } from 'vitest';
import { buildPlan } from '../../../core/plan/build-plan.js';
import { describeChange } from '../../../core/plan/diff-values.js';
import { renderPlanJson } from '../../../views/render-plan-json.js';
import { renderPlanMarkdown } from '../../../views/render-plan-markdown.js';
import { renderPlanText } from '../../../views/render-plan-text.js';
import { plainStyle } from '../../../views/style.js';
import { clone, layoutOf, load, shopDoc, type TopologyDoc } from '../../support/builders.js';

const databaseUrl = { ref: 'db', format: 'postgres://app@{host}:{port}/app' };

function withEnv(env: Record<string, unknown>, dependsOn = ['db']): TopologyDoc {
  const doc = shopDoc();
  doc.components.api = { ...doc.components.api, env, dependsOn };
  return doc;
}

describe('plans of references to dependencies', () => {
  it('a replaced dependency replaces the component that refers to it, and says why', () => {
    const before = withEnv({ DATABASE_URL: databaseUrl, LOG_LEVEL: 'info' });
    const after = clone(before);
    after.components.db = { ...after.components.db, version: '16' };
    const plan = buildPlan(layoutOf(before), load(after));
    const api = plan.resources.find((r) => r.name === 'api');
    expect(api).toMatchObject({
      change: 'replace',
      reason: 'dependency db is replaced (env DATABASE_URL refers to it)',
      changes: [],
    });
    const text = renderPlanText(plan, { style: plainStyle });
    expect(text).toContain(
      '  -/+ component api will be replaced green-blue\n      because: dependency db is replaced (env DATABASE_URL refers to it)',
    );
    // db first: api's green is stood up against db's green.
    const ids = plan.actions.map((a) => a.id);
    expect(ids.indexOf('provision_green:db')).toBeLessThan(ids.indexOf('provision_green:api'));
    expect(plan.actions.find((a) => a.id === 'provision_green:api')?.after).toContain('provision_green:db');
  });

  it('names every key and every dependency referred to; a dependency not referred to is plain', () => {
    const before = withEnv(
      {
        DATABASE_URL: databaseUrl,
        DB_HOSTS: { ref: 'db', format: '{addresses}' },
        MAILER: { ref: 'mailer' },
      },
      ['db', 'mailer'],
    );
    const after = clone(before);
    after.components.db = { ...after.components.db, version: '16' };
    after.components.mailer = { ...after.components.mailer, version: '1.0.0' };
    const reason = buildPlan(layoutOf(before), load(after)).resources.find((r) => r.name === 'api')?.reason;
    expect(reason).toBe(
      'dependencies db, mailer are replaced (env DATABASE_URL, DB_HOSTS refer to db; env MAILER refers to mailer)',
    );
    const plain = withEnv({}, ['db']);
    const bumped = clone(plain);
    bumped.components.db = { ...bumped.components.db, version: '16' };
    const plainReason = buildPlan(layoutOf(plain), load(bumped)).resources.find(
      (r) => r.name === 'api',
    )?.reason;
    expect(plainReason).toBe('dependency db is replaced');
  });

  it('shows a reference like any value: text, markdown and json', () => {
    const before = withEnv({ DATABASE_URL: 'postgres://app@10.0.0.5:5432/app' });
    const after = withEnv({ DATABASE_URL: databaseUrl, DB: { ref: 'db' } });
    const plan = buildPlan(layoutOf(before), load(after));
    const api = plan.resources.find((r) => r.name === 'api');
    expect(api?.changes).toEqual([
      { path: 'env.DATABASE_URL', before: 'postgres://app@10.0.0.5:5432/app', after: databaseUrl },
      { path: 'env.DB', after: { format: '{address}', ref: 'db' } },
    ]);
    const text = renderPlanText(plan, { style: plainStyle });
    expect(text).toContain(
      '~ env.DATABASE_URL: "postgres://app@10.0.0.5:5432/app" → ref db as "postgres://app@{host}:{port}/app"',
    );
    expect(text).toContain('+ env.DB: ref db as "{address}"');
    expect(api?.reason).toBe(
      'env.DATABASE_URL postgres://app@10.0.0.5:5432/app → ref db as "postgres://app@{host}:{port}…, env.DB added (ref db as "{address}")',
    );
    expect(renderPlanMarkdown(plan)).toContain(
      '| <code>env.DATABASE_URL</code> | <code>"postgres://app@10.0.0.5:5432/app"</code> | <code>ref db as "postgres://app@{host}:{port}/app"</code> |',
    );
    const json = JSON.parse(renderPlanJson(plan)) as typeof plan;
    expect(json.resources.find((r) => r.name === 'api')?.changes?.[0]?.after).toEqual(databaseUrl);
  });

  it('a changed format or target is one change of the value, not of its fields', () => {
    const before = withEnv({ DATABASE_URL: databaseUrl }, ['db', 'mailer']);
    const after = withEnv({ DATABASE_URL: { ref: 'mailer', format: '{address}' } }, ['db', 'mailer']);
    const changes = buildPlan(layoutOf(before), load(after)).resources.find((r) => r.name === 'api')?.changes;
    expect(changes).toEqual([
      { path: 'env.DATABASE_URL', before: databaseUrl, after: { format: '{address}', ref: 'mailer' } },
    ]);
    expect(describeChange(changes?.[0] as never)).toBe(
      'env.DATABASE_URL ref db as "postgres://app@{host}:{port}… → ref mailer as "{address}"',
    );
  });

  it('an unchanged reference to a kept dependency plans nothing', () => {
    const doc = withEnv({ DATABASE_URL: databaseUrl });
    expect(buildPlan(layoutOf(doc), load(clone(doc))).actions).toEqual([]);
  });
});
