/**
 * ReplayableBody on its own (a pure unit test: a PassThrough stands for the client's request and an
 * array for the upstream): what it reads before a connection is taken, what it keeps for a resend,
 * and the memory it takes from the router's budget.
 */
import type { IncomingMessage } from 'node:http';
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { BodyBudget, type BodySink, ReplayableBody } from '../../router/replayable-body.js';
import { eventually } from './support.js';

function client() {
  return new PassThrough() as PassThrough & IncomingMessage;
}

function sink() {
  const written: Buffer[] = [];
  let ended = false;
  const target: BodySink = {
    destroyed: false,
    write: (chunk) => {
      written.push(chunk);
      return true;
    },
    end: () => {
      ended = true;
    },
    onceDrain: () => undefined,
  };
  return { target, text: () => Buffer.concat(written).toString(), ended: () => ended };
}

function reader() {
  const events: string[] = [];
  return {
    events,
    reader: {
      bodyReady: () => events.push('ready'),
      bodyTimedOut: (cause: string) => events.push(cause === 'client-silent' ? 'timeout' : cause),
    },
  };
}

describe('router: request bodies read before they go upstream', () => {
  it('is ready only once a small body has ended, and sends all of it, twice if asked', async () => {
    const source = client();
    const budget = new BodyBudget(1024);
    const body = new ReplayableBody(source, budget, 60_000, 100);
    const { events, reader: r } = reader();
    body.read(r);
    source.write('hello ');
    await eventually(() => budget.usedBytes === 6);
    expect(events).toEqual([]);
    source.end('world');
    await eventually(() => events.length === 1);
    expect([events, body.replayable]).toEqual([['ready'], true]);
    const first = sink();
    body.attach(first.target);
    const second = sink();
    body.attach(second.target);
    expect([first.text(), first.ended(), second.text(), second.ended()]).toEqual([
      'hello world',
      true,
      'hello world',
      true,
    ]);
    body.close();
    expect(budget.usedBytes).toBe(0);
  });

  it('streams a body past its bound: ready at the bound, the rest once attached, not kept', async () => {
    const source = client();
    const budget = new BodyBudget(1024);
    const body = new ReplayableBody(source, budget, 60_000, 10);
    const { events, reader: r } = reader();
    body.read(r);
    source.write('0123456789');
    source.write('abcdef');
    await eventually(() => events.length === 1);
    expect(body.replayable).toBe(true); // all read so far is still held: a refused connection may retry
    const upstream = sink();
    body.attach(upstream.target);
    expect(body.replayable).toBe(false);
    expect(budget.usedBytes).toBe(0);
    source.end('XYZ');
    await eventually(() => upstream.ended());
    expect(upstream.text()).toBe('0123456789abcdefXYZ');
  });

  it('waits for memory while the router-wide budget is full: paused, not ready, then reads on', async () => {
    const budget = new BodyBudget(8);
    const firstSource = client();
    const held = new ReplayableBody(firstSource, budget, 60_000, 100);
    held.read(reader().reader);
    firstSource.write('12345678');
    await eventually(() => budget.usedBytes === 8);
    const source = client();
    const body = new ReplayableBody(source, budget, 60_000, 100);
    const { events, reader: r } = reader();
    body.read(r);
    source.write('abc');
    source.end();
    // It holds no connection meanwhile: no 'ready' while its bytes have no memory.
    await eventually(() => source.isPaused());
    expect([events, budget.usedBytes]).toEqual([[], 8]);
    held.close();
    await eventually(() => events.length === 1);
    expect([events, budget.usedBytes]).toEqual([['ready'], 3]);
    const upstream = sink();
    body.attach(upstream.target);
    expect([upstream.text(), upstream.ended()]).toEqual(['abc', true]);
    body.close();
    expect(budget.usedBytes).toBe(0);
  });

  it('gives up waiting for memory after the body timeout, as memory-full, and holds nothing', async () => {
    const budget = new BodyBudget(8);
    const firstSource = client();
    const held = new ReplayableBody(firstSource, budget, 60_000, 100);
    held.read(reader().reader);
    firstSource.write('12345678');
    await eventually(() => budget.usedBytes === 8);
    const source = client();
    const body = new ReplayableBody(source, budget, 200, 100);
    const { events, reader: r } = reader();
    body.read(r);
    source.write('abc');
    await eventually(() => events.length > 0, 2_000);
    expect(events).toEqual(['memory-full']);
    // The memory it waited for goes to nobody once it gave up.
    held.close();
    expect(budget.usedBytes).toBe(0);
  });

  it('never holds more than the budget: 1000 clients sending 64 KiB each', async () => {
    const budget = new BodyBudget(1024 * 1024);
    const piece = Buffer.alloc(64 * 1024, 'b');
    const sources = Array.from({ length: 1000 }, () => client());
    const bodies = sources.map((source) => {
      const body = new ReplayableBody(source, budget, 60_000, 1024 * 1024);
      body.read(reader().reader);
      source.write(piece);
      return body;
    });
    // Every piece was handed to its body (it holds it, or waits with it for memory).
    await eventually(() => sources.every((source) => source.readableLength === 0));
    expect(budget.usedBytes).toBeLessThanOrEqual(budget.maxBytes);
    // As bodies go, the memory passes to those waiting, never past the cap.
    for (const body of bodies.slice(0, 500)) {
      body.close();
      expect(budget.usedBytes).toBeLessThanOrEqual(budget.maxBytes);
    }
    expect(budget.usedBytes).toBe(budget.maxBytes);
    for (const body of bodies) body.close();
    expect(budget.usedBytes).toBe(0);
  });

  it('times the client out when it sends nothing for the timeout', async () => {
    const source = client();
    const body = new ReplayableBody(source, new BodyBudget(), 200);
    const { events, reader: r } = reader();
    body.read(r);
    source.write('a');
    await eventually(() => events.length > 0, 2_000);
    expect(events).toEqual(['timeout']);
  });
});
