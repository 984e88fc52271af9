import { describe, expect, it } from 'vitest';
import { countdownEvery, leftText, sleepCounting, throttled } from '../../../engine/runner/countdown.js';

describe('progress during a timed hold', () => {
  it('says how long is left as the wait goes, about four times for a short one', async () => {
    const said: string[] = [];
    const started = Date.now();
    await sleepCounting(3_000, new AbortController().signal, (left) =>
      said.push(`hold: ${leftText(left)} left`),
    );
    expect(Date.now() - started).toBeGreaterThanOrEqual(2_990);
    expect(said).toEqual(['hold: 2s left', 'hold: 1s left']);
  });

  it('speaks at most every 10 s on a long hold, and never more than once a second', () => {
    expect(countdownEvery(120_000)).toBe(10_000); // hold: 2m → a line every 10 s, 11 in all
    expect(countdownEvery(20_000)).toBe(5_000);
    expect(countdownEvery(1_000)).toBe(1_000);
    expect(leftText(99_600)).toBe('1m40s');
    // A timer that fired a millisecond early one second into a 4 s hold (ci18 read "4s left of 4s").
    expect(leftText(3_001)).toBe('3s');
    expect(leftText(200)).toBe('1s');
  });

  it('throttles the analysis samples to the same pace (no flood)', () => {
    const said: string[] = [];
    const say = throttled(120_000, (t) => said.push(t));
    for (let i = 0; i < 100; i++) say(`sample ${i}`);
    expect(said).toEqual([]); // all within the first 10 s
  });
});
