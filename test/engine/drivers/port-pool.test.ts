import { describe, expect, it } from 'vitest';
import { PortPool } from '../../../engine/drivers/port-pool.js';

describe('PortPool', () => {
  it('never hands out a port twice within the hold, across calls (concurrent provisions share a driver set)', async () => {
    // The kernel gives a just-closed port to the next bind(0) again often enough (59 repeats in
    // 1,000 calls on this machine) that two provisions running at once could start on one port.
    const pool = new PortPool();
    const seen = new Set<number>();
    const calls = await Promise.all(Array.from({ length: 50 }, () => pool.take(4)));
    for (let i = 0; i < 600; i++) calls.push(await pool.take(1));
    for (const ports of calls)
      for (const port of ports) {
        expect(seen.has(port)).toBe(false);
        seen.add(port);
      }
    expect(seen.size).toBe(800);
  });
});
