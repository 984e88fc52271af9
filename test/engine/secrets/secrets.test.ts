/** Where secrets are read at apply time, and the key that hashes them: real files in temp dirs. */
import { mkdirSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CutoverError } from '../../../core/errors.js';
import { inheritedEnv, resolveComponentEnv } from '../../../engine/secrets/resolve-secrets.js';
import { secretHasher } from '../../../engine/secrets/secret-key.js';
import { secretSource } from '../../../engine/secrets/secret-source.js';
import { StateDir } from '../../../engine/store/state-dir.js';
import { resourcesPerTest } from '../../support/resources.js';

const resources = resourcesPerTest();

const value = 'pw-Zorkmid-4417';

async function secretsFile(text: string, mode = 0o600, dir?: string): Promise<string> {
  const file = path.join(dir ?? (await resources.tempDir()), 'secrets.env');
  writeFileSync(file, text, { mode });
  return file;
}

async function refusal(promise: Promise<unknown>): Promise<CutoverError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(CutoverError);
  return error as CutoverError;
}

describe('the secret key', () => {
  it('is made on first use with mode 0600, and every process of the state directory shares it', async () => {
    const stateDir = StateDir.at(path.join(await resources.tempDir(), 'state'));
    const [a, b] = await Promise.all([secretHasher(stateDir), secretHasher(stateDir)]);
    expect(statSync(stateDir.secretKeyFile()).mode & 0o777).toBe(0o600);
    expect(a(value)).toBe(b(value));
    expect((await secretHasher(stateDir))(value)).toBe(a(value));
    expect(a(value)).toMatch(/^hmac-sha256:[0-9a-f]{12}:[0-9a-f]{64}$/);
    expect(a(value)).not.toBe(a(`${value}x`));
    // Another state directory, another key: its digests name another key id.
    const other = await secretHasher(StateDir.at(path.join(await resources.tempDir(), 'state')));
    expect(other(value).split(':')[1]).not.toBe(a(value).split(':')[1]);
  });
});

describe('the secret source', () => {
  it('reads $CUTOVER_SECRET_<NAME> first, then the secrets file', async () => {
    const file = await secretsFile(`# comment\nexport DB_PASSWORD="${value}"\nAPI_TOKEN=tok=en\n`);
    const dir = await resources.tempDir();
    const source = secretSource({ CUTOVER_SECRETS_FILE: file, CUTOVER_SECRET_API_TOKEN: 'from-env' }, dir);
    expect(await source.lookup('DB_PASSWORD')).toBe(value);
    expect(await source.lookup('API_TOKEN')).toBe('from-env');
    expect(await source.lookup('NOPE')).toBeUndefined();
  });

  it('refuses a secrets file other users can read, naming it, its mode and the fix', async () => {
    const file = await secretsFile(`DB_PASSWORD=${value}\n`, 0o640);
    const error = await refusal(
      secretSource({ CUTOVER_SECRETS_FILE: file }, await resources.tempDir()).lookup('DB_PASSWORD'),
    );
    expect(error.code).toBe('USAGE');
    expect(error.message).toBe(
      `secrets file ${file} is open to other users (mode 0640); run chmod 600 ${file}`,
    );
  });

  it("refuses a secrets file inside the topology's Git work tree", async () => {
    const repo = await resources.tempDir();
    mkdirSync(path.join(repo, '.git'));
    mkdirSync(path.join(repo, 'deploy'));
    const file = await secretsFile(`DB_PASSWORD=${value}\n`, 0o600, repo);
    const error = await refusal(
      secretSource({ CUTOVER_SECRETS_FILE: file }, path.join(repo, 'deploy')).lookup('DB_PASSWORD'),
    );
    expect(error.message).toBe(
      `secrets file ${file} is inside the topology's Git work tree ${repo}; move it outside (e.g. ~/.config/cutover/) so it is never committed`,
    );
  });

  it('names the file and line of a malformed line, never its text; and a file that is not there', async () => {
    const file = await secretsFile(`DB_PASSWORD=${value}\n${value}\n`);
    const error = await refusal(
      secretSource({ CUTOVER_SECRETS_FILE: file }, await resources.tempDir()).lookup('DB_PASSWORD'),
    );
    expect(error.message).toBe(
      `secrets file ${file}:2: expected NAME=value (a name of letters, digits and _)`,
    );
    const gone = path.join(await resources.tempDir(), 'gone.env');
    const missing = await refusal(secretSource({ CUTOVER_SECRETS_FILE: gone }, '/').lookup('X'));
    expect(missing.message).toBe(
      `secrets file ${gone} does not exist; create it (NAME=value lines, mode 0600) or correct --secrets-file / CUTOVER_SECRETS_FILE`,
    );
  });
});

describe('resolving a component env', () => {
  it('gives the values and their digests; a missing secret names itself and where it was looked for', async () => {
    const stateDir = StateDir.at(path.join(await resources.tempDir(), 'state'));
    const hasher = () => secretHasher(stateDir);
    const spec = { env: { DB_PASSWORD: { secret: 'DB_PASSWORD' }, LOG_LEVEL: 'info' } };
    const source = secretSource({ CUTOVER_SECRET_DB_PASSWORD: value }, '/');
    const resolved = await resolveComponentEnv('api', spec, source, { hasher });
    expect(resolved.env).toEqual({ DB_PASSWORD: value, LOG_LEVEL: 'info' });
    expect(resolved.digests?.DB_PASSWORD).toBe((await hasher())(value));
    const error = await refusal(resolveComponentEnv('api', spec, secretSource({}, '/'), { hasher }));
    expect(error.message).toBe(
      `secret DB_PASSWORD (env.DB_PASSWORD of component api) is not set: looked for $CUTOVER_SECRET_DB_PASSWORD of process ${process.pid} (unset) and no secrets file (CUTOVER_SECRETS_FILE is not set); set it where the migration runs`,
    );
  });

  it("keeps cutover's own secrets out of what components inherit", () => {
    const env = inheritedEnv({ PATH: '/bin', CUTOVER_SECRET_DB_PASSWORD: value, CUTOVER_SECRETS_FILE: '/s' });
    expect(env).toEqual({ PATH: '/bin' });
  });
});
