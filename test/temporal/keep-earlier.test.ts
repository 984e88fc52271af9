/**
 * The environment workflow keeps earlier layouts to tell a stale plan from a changed one. They go
 * into its continue-as-new input (at most 2 MB once compressed): bounded in count and in size.
 */
import { describe, expect, it } from 'vitest';
import type { CurrentLayout } from '../../core/layout.js';
import { keepEarlier } from '../../engine/temporal/environment-workflow.js';

const layout = (serial: number): CurrentLayout => ({ environment: 'shop', serial, topology: null });

describe('earlier layouts kept by the environment workflow', () => {
  it('keeps the 20 newest', () => {
    let earlier: CurrentLayout[] = [];
    for (let serial = 0; serial < 30; serial++) earlier = keepEarlier(earlier, layout(serial));
    expect(earlier.map((l) => l.serial)).toEqual(Array.from({ length: 20 }, (_, i) => i + 10));
  });

  it('keeps as many as CUTOVER_KEEP_LAYOUTS said when it was sent (keep)', () => {
    let earlier: CurrentLayout[] = [];
    for (let serial = 0; serial < 10; serial++) earlier = keepEarlier(earlier, layout(serial), undefined, 3);
    expect(earlier.map((l) => l.serial)).toEqual([7, 8, 9]);
  });

  it('keeps fewer when they are large, newest first, never over 8 million characters', () => {
    let earlier: CurrentLayout[] = [];
    const size = () => 3_000_000; // a layout of about 6,000 components
    for (let serial = 0; serial < 5; serial++) earlier = keepEarlier(earlier, layout(serial), size);
    expect(earlier.map((l) => l.serial)).toEqual([3, 4]);
  });

  it('keeps none when even the newest is over the bound', () => {
    expect(keepEarlier([layout(1)], layout(2), () => 9_000_000)).toEqual([]);
  });
});
