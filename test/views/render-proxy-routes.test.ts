/** `cutover proxy routes`'s view of the router's `GET /routes`: certificates' expiry and failed loads flagged. */
import { describe, expect, it } from 'vitest';
import type { ServedCertificateInfo } from '../../core/certificate-expiry.js';
import { type ProxyRoutesView, renderProxyRoutesText } from '../../views/render-proxy-routes.js';
import { colorStyle, plainStyle } from '../../views/style.js';

const now = Date.parse('2026-11-28T10:00:00.000Z');
const day = 86_400_000;

function certificate(name: string, notAfterMs: number): ServedCertificateInfo {
  return {
    names: [name, `*.${name}`],
    file: `/srv/tls/${name}.pem`,
    notBefore: '2026-01-01T00:00:00.000Z',
    notAfter: new Date(notAfterMs).toISOString(),
    fingerprint256: 'AB:CD',
  };
}

const route = {
  listen: '0.0.0.0:443',
  greenPercent: 10,
  blue: ['127.0.0.1:9001'],
  green: ['127.0.0.1:9002'],
  inFlight: { blue: 2, green: 1 },
};

const snapshot: ProxyRoutesView = {
  routes: {
    'prod/www': {
      ...route,
      tls: {
        certificates: [
          certificate('shop.test', now + 90 * day),
          certificate('api.test', now + 13 * day),
          certificate('old.test', now - 3 * 3_600_000),
        ],
        loadedAt: '2026-11-28T09:00:00.000Z',
        problem: 'the key /srv/tls/api.key does not match the certificate /srv/tls/api.pem',
        failedAt: '2026-11-28T09:30:00.000Z',
        failedLoads: 2,
      },
    },
    'prod/admin': {
      ...route,
      listen: '0.0.0.0:8443',
      tls: {
        certificates: [],
        problem: 'cannot read the certificate /srv/tls/admin.pem: missing',
        failedLoads: 1,
      },
    },
    'prod/plain': { ...route, listen: '0.0.0.0:80', hold: { id: 'p1', held: 4, pause: {} } },
  },
  problems: [],
};

describe('cutover proxy routes (view)', () => {
  it('shows each certificate expiry short, flags within 14 days or past, and a failed reload', () => {
    expect(renderProxyRoutesText(snapshot, now, plainStyle)).toBe(
      [
        'prod/admin  https 0.0.0.0:8443  blue 90% / green 10%  in flight 3',
        '  blue   127.0.0.1:9001',
        '  green  127.0.0.1:9002',
        '  certificates',
        '    none served',
        '    ! load failed: cannot read the certificate /srv/tls/admin.pem: missing',
        'prod/plain  http 0.0.0.0:80  blue 90% / green 10%  in flight 3  paused, 4 held',
        '  blue   127.0.0.1:9001',
        '  green  127.0.0.1:9002',
        'prod/www  https 0.0.0.0:443  blue 90% / green 10%  in flight 3',
        '  blue   127.0.0.1:9001',
        '  green  127.0.0.1:9002',
        '  certificates (loaded 2026-11-28 09:00:00 UTC)',
        '    shop.test, *.shop.test  until 2027-02-26 (90 days left)     /srv/tls/shop.test.pem',
        '    api.test, *.api.test    until 2026-12-11 (13 days left)     /srv/tls/api.test.pem  ! expires within 14 days',
        '    old.test, *.old.test    until 2026-11-28 (expired 3 h ago)  /srv/tls/old.test.pem  ! expired',
        '    ! reload failed at 2026-11-28 09:30:00 UTC: the key /srv/tls/api.key does not match the certificate /srv/tls/api.pem; the certificates above, loaded before, are still served',
        '',
      ].join('\n'),
    );
  });

  it('colours an expired certificate red and one expiring soon yellow', () => {
    const text = renderProxyRoutesText(snapshot, now, colorStyle);
    expect(text).toContain('    \u001b[31mold.test, *.old.test');
    expect(text).toContain('\u001b[33mapi.test, *.api.test');
  });

  it('a certificate expiring in exactly 14 days is flagged, one a minute later is not', () => {
    const at = (ms: number) =>
      renderProxyRoutesText(
        {
          routes: {
            'prod/www': { ...route, tls: { certificates: [certificate('a.test', ms)], failedLoads: 0 } },
          },
          problems: [],
        },
        now,
        plainStyle,
      );
    expect(at(now + 14 * day)).toContain('(14 days left)');
    expect(at(now + 14 * day)).toContain('! expires within 14 days');
    expect(at(now + 14 * day + 60_000)).not.toContain('!');
  });
});
