/**
 * Which events a target wants (core/notify/target-filter.ts): the filter a Temporal workflow applies
 * before it schedules a delivery, so a target only hears what its `severity` and `events` ask for.
 */
import { describe, expect, it } from 'vitest';
import { cloudEvent } from '../../../core/notify/migration-events.js';
import { targetWants } from '../../../core/notify/target-filter.js';
import type { NotifyEventName } from '../../../core/notify/types.js';
import type { NotifyTarget } from '../../../core/topology/types.js';
import { clone, shopDoc } from '../../support/builders.js';
import { specOf } from '../../support/migration-builders.js';

const before = shopDoc();
const after = clone(before);
after.components.api = { ...after.components.api, version: '2.1.0' };
const spec = specOf(before, after);
const event = (name: NotifyEventName) => cloudEvent(spec, name, 1, 0, 1_000, { message: name });

const target = (filter: Partial<Pick<NotifyTarget, 'severity' | 'events'>>): NotifyTarget => ({
  type: 'command',
  command: ['true'],
  timeout: 1_000,
  retries: 0,
  severity: 'info',
  ...filter,
});

describe('targetWants', () => {
  it('passes events at or above the target severity only', () => {
    const warnings = target({ severity: 'warning' });
    expect(targetWants(warnings, event('started'))).toBe(false);
    expect(targetWants(warnings, event('rolled_back'))).toBe(true);
    expect(targetWants(warnings, event('failed'))).toBe(true);
    expect(targetWants(target({ severity: 'error' }), event('rolled_back'))).toBe(false);
  });

  it('passes only the listed events when the target lists some', () => {
    const some = target({ events: ['completed', 'failed'] });
    expect(targetWants(some, event('completed'))).toBe(true);
    expect(targetWants(some, event('step_reached'))).toBe(false);
    expect(targetWants(target({}), event('step_reached'))).toBe(true);
  });
});
