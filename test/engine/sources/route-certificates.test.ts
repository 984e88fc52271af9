/**
 * The certificate files of TLS routes, checked where the topology is read: `validate` and a
 * migration refuse a missing file or a key that is not its certificate's, by file, line and field.
 */
import { copyFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeCertificate } from '../../support/certificates.js';
import { runCli, tempDir } from '../../support/cli.js';

const topology = (cert: string, key: string) => `apiVersion: cutover/v1
kind: Topology
metadata: { name: shop }
drivers:
  apps: { type: process }
components:
  api: { driver: apps, version: "1", run: { command: [node, app.js] } }
routes:
  web:
    listen: 127.0.0.1:8443
    to: api
    tls:
      certificates:
        - cert: ${cert}
          key: ${key}
`;

describe('route certificates', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    ({ dir, cleanup } = await tempDir());
    makeCertificate(dir, 'site', ['shop.test']);
    makeCertificate(dir, 'other', ['other.test']);
    copyFileSync(path.join(dir, 'other.key'), path.join(dir, 'wrong.key'));
  });
  afterAll(() => cleanup());

  async function validate(cert: string, key: string) {
    const file = path.join(dir, 'topology.yaml');
    await writeFile(file, topology(cert, key));
    return runCli(['topology', 'validate', '-f', file]);
  }

  it('accepts a pair relative to the topology file', async () => {
    const result = await validate('site.pem', 'site.key');
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
  });

  it('refuses a missing file and a key of another certificate, by line and field', async () => {
    const missing = await validate('gone.pem', 'site.key');
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain(
      `topology.yaml:14:17 routes.web.tls.certificates[0].cert: cannot read the certificate ${path.join(dir, 'gone.pem')}: no such file`,
    );
    const wrong = await validate('site.pem', 'wrong.key');
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toContain(
      `topology.yaml:15:16 routes.web.tls.certificates[0].key: the key ${path.join(dir, 'wrong.key')} does not match the certificate ${path.join(dir, 'site.pem')}`,
    );
  });

  it('refuses a migration with a bad pair before it starts', async () => {
    const file = path.join(dir, 'topology.yaml');
    await writeFile(file, topology('site.pem', 'wrong.key'));
    const result = await runCli(['topology', 'migrate', '-f', file, '--yes'], {
      env: { CUTOVER_STATE_DIR: path.join(dir, 'state') },
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('routes.web.tls.certificates[0].key: the key');
  });
});
