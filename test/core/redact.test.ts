import { describe, expect, it } from 'vitest';
import { maskCredentialShapes, minMaskedValueChars, redactorOf } from '../../core/redact.js';

describe('redactorOf', () => {
  it('masks every known value, longest first, in text and in every string of a JSON value', () => {
    const redact = redactorOf(['s3cret-pw', 's3cret-pw-and-more']);
    expect(redact.text('a s3cret-pw-and-more b s3cret-pw')).toBe('a (sensitive) b (sensitive)');
    expect(redact.value({ reason: 'fatal: s3cret-pw', list: ['x', 's3cret-pw'], at: 3, keep: null })).toEqual(
      { reason: 'fatal: (sensitive)', list: ['x', '(sensitive)'], at: 3, keep: null },
    );
  });

  it('masks a value as JSON escapes it, so serialised text is masked too', () => {
    const value = 'pa"ss\\word';
    const redact = redactorOf([value]);
    const line = JSON.stringify({ message: `got ${value}` });
    expect(line).not.toContain(value);
    expect(redact.text(line)).toBe(JSON.stringify({ message: 'got (sensitive)' }));
  });

  it('leaves values too short to mean anything alone', () => {
    const short = 'x'.repeat(minMaskedValueChars - 1);
    expect(redactorOf([short]).text(`a ${short} b`)).toBe(`a ${short} b`);
  });
});

describe('maskCredentialShapes', () => {
  it.each([
    ['https://user:pw@host/x', 'https://(sensitive)@host/x'],
    ['postgres://app:hunter22@db:5432/shop', 'postgres://(sensitive)@db:5432/shop'],
    ['POST http://h/check?token=abc&x=1', 'POST http://h/check?token=(sensitive)&x=1'],
    ['http://h/?a=1&api_key=k1&password=p', 'http://h/?a=1&api_key=(sensitive)&password=(sensitive)'],
    ['Authorization: Bearer abcdefghijkl', 'Authorization: Bearer (sensitive)'],
    ['https://hooks.slack.com/services/T0/B0/XYZ', 'https://hooks.slack.com/(sensitive)'],
  ])('%s', (text, masked) => {
    expect(maskCredentialShapes(text)).toBe(masked);
  });

  it('leaves what carries no credential as it is', () => {
    for (const text of ['http://127.0.0.1:4001/healthz', 'GET /healthz → 503', 'a@b.c wrote', 'x=1&y=2']) {
      expect(maskCredentialShapes(text)).toBe(text);
    }
  });
});
