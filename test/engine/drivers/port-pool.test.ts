import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { listenerPorts, PortPool } from '../../../engine/drivers/port-pool.js';

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

  it('chooses below the ephemeral range, where no outgoing connection takes a port between its choice and its bind', async () => {
    const [ephemeralLow] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8')
      .trim()
      .split(/\s+/)
      .map(Number);
    const range = listenerPorts();
    expect(range?.high).toBe((ephemeralLow as number) - 1);
    const ports = await new PortPool().take(200);
    expect(new Set(ports).size).toBe(200);
    for (const port of ports) {
      expect(port).toBeGreaterThanOrEqual(range?.low as number);
      expect(port).toBeLessThan(ephemeralLow as number);
    }
  });

  it("never chooses a reserved port, free or not (a route's address, before the router binds it)", async () => {
    // Seen in CI: a replica started on the port its own route was to listen on, and the router then
    // failed with EADDRINUSE. Every other port of the range reserved: none of them is chosen.
    const range = listenerPorts() as { low: number; high: number };
    const reserved = new Set<number>();
    for (let port = range.low; port <= range.high; port += 2) reserved.add(port);
    const chosen = await new PortPool().take(100, reserved);
    expect(chosen.filter((port) => reserved.has(port))).toEqual([]);
    expect(new Set(chosen).size).toBe(100);
  });
});
