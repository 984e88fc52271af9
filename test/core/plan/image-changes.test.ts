/**
 * Plans of container components: a tag that names another image than the live slot runs (the
 * engine resolved it before planning) is a change, shown as one; same image, unknown, or no
 * container at all: the plan is the one it was.
 */
import { describe, expect, it } from 'vitest';
import type { CurrentLayout } from '../../../core/layout.js';
import { buildPlan } from '../../../core/plan/build-plan.js';
import { load, shopDoc, type TopologyDoc } from '../../support/builders.js';

const built1 = `sha256:${'a1'.repeat(32)}`;
const built2 = `sha256:${'b2'.repeat(32)}`;

function containerDoc(): TopologyDoc {
  const doc = shopDoc();
  doc.drivers.ctr = { type: 'container' };
  doc.components.web = {
    driver: 'ctr',
    version: '1.4.0',
    image: 'shop/web:1',
    ports: [{ container: 8080 }],
    dependsOn: ['api'],
  };
  return doc;
}

function liveWith(doc: TopologyDoc, imageId?: string): CurrentLayout {
  const slot = { component: 'web', slot: 'blue' as const, version: '1.4.0', addresses: ['127.0.0.1:40001'] };
  return {
    environment: 'shop',
    serial: 4,
    topology: load(doc),
    slots: { web: imageId ? { ...slot, imageId } : slot },
  };
}

describe('plans of container images', () => {
  it('replaces a component whose tag moved to another image, saying which', () => {
    const doc = containerDoc();
    const plan = buildPlan(liveWith(doc, built1), load(doc), { images: { web: built2 } });
    const web = plan.resources.find((r) => r.name === 'web');
    expect(web?.change).toBe('replace');
    expect(web?.changes).toEqual([
      {
        path: 'image',
        before: 'shop/web:1 (sha256:a1a1a1a1a1a1)',
        after: 'shop/web:1 (sha256:b2b2b2b2b2b2)',
      },
    ]);
    expect(web?.reason).toBe('image shop/web:1 (sha256:a1a1a1a1a1a1) → shop/web:1 (sha256:b2b2b2b2b2b2)');
    expect(plan.actions.map((a) => a.id)).toContain('provision_green:web');
    // Deterministic: the same inputs, the same id.
    expect(buildPlan(liveWith(doc, built1), load(doc), { images: { web: built2 } }).planId).toBe(plan.planId);
  });

  it('plans nothing when the tag still names the live image, or either side is unknown', () => {
    const doc = containerDoc();
    const same = buildPlan(liveWith(doc, built1), load(doc), { images: { web: built1 } });
    expect(same.actions).toEqual([]);
    expect(buildPlan(liveWith(doc), load(doc), { images: { web: built2 } }).actions).toEqual([]);
    expect(buildPlan(liveWith(doc, built1), load(doc), { images: {} }).actions).toEqual([]);
    // Images known or not, a plan without any change has the id of a plan made without them.
    expect(same.planId).toBe(buildPlan(liveWith(doc, built1), load(doc)).planId);
  });

  it('shows a changed tag once, as the field it is', () => {
    const doc = containerDoc();
    const next = containerDoc();
    (next.components.web as Record<string, unknown>).image = 'shop/web:2';
    const plan = buildPlan(liveWith(doc, built1), load(next), { images: { web: built2 } });
    expect(plan.resources.find((r) => r.name === 'web')?.changes).toEqual([
      { path: 'image', before: 'shop/web:1', after: 'shop/web:2' },
    ]);
  });
});
