/**
 * Which hosts a migration's calls wait for, from its workflow's pending activities (a pure unit
 * test; test/temporal/hosts.test.ts proves it on the real dev server): a call scheduled on a host's
 * queue and not taken for a few seconds means no live worker polls that host.
 */
import { describe, expect, it } from 'vitest';
import { hostsWaiting, type PendingActivity, unstartedWaitMs } from '../../engine/temporal/host-wait.js';

const scheduled = 1;
const started = 2;
const now = Date.parse('2026-11-27T21:03:10Z');
const queueOf = (host: string) => `q@${host}`;

/** A pending activity as DescribeWorkflowExecution gives it (seconds a Long-like, as the client's). */
function pending(queue: string | null, state: number, scheduledAt: number): PendingActivity {
  return {
    state,
    scheduledTime: {
      seconds: { toString: () => String(Math.floor(scheduledAt / 1000)) },
      nanos: (scheduledAt % 1000) * 1e6,
    },
    ...(queue === null ? {} : { activityOptions: { taskQueue: { name: queue } } }),
  };
}

describe('hosts waiting for a worker, from the pending activities', () => {
  it('a call scheduled on b and not started for more than a few seconds: b waits, a does not', () => {
    const calls = [
      pending('q@b', scheduled, now - unstartedWaitMs - 1_000),
      pending('q@a', started, now - 60_000),
    ];
    expect(hostsWaiting(calls, ['a', 'b'], queueOf, now)).toEqual(['b']);
  });

  it('a call scheduled a moment ago has not waited yet: a live worker takes it at once', () => {
    expect(hostsWaiting([pending('q@b', scheduled, now - 1_000)], ['b'], queueOf, now)).toEqual([]);
  });

  it('a call in retry backoff (scheduled in the future) waits for its time, not for a worker', () => {
    expect(hostsWaiting([pending('q@b', scheduled, now + 20_000)], ['b'], queueOf, now)).toEqual([]);
  });

  it('a call started long ago runs on a worker: its host does not wait', () => {
    expect(hostsWaiting([pending('q@b', started, now - 60_000)], ['b'], queueOf, now)).toEqual([]);
  });

  it('a call on another queue, or one whose queue the server does not say, tells nothing of b', () => {
    const calls = [
      pending('q', scheduled, now - 60_000),
      pending('q@bb', scheduled, now - 60_000),
      pending(null, scheduled, now - 60_000),
    ];
    expect(hostsWaiting(calls, ['b'], queueOf, now)).toEqual([]);
  });

  it('nothing pending: no host waits by this rule (the poller list decides)', () => {
    expect(hostsWaiting([], ['a', 'b'], queueOf, now)).toEqual([]);
  });
});
