/**
 * `Idempotency-Key` for the operations that change something (apply, cancel, the verbs): the first
 * request with a key runs and its 2xx response is kept (on disk, in the state directory, so a retry
 * after a restart of the server is safe too); a retry with the same key and the same request gets
 * that response again, marked `Idempotent-Replayed: true`, without running twice. The same key with
 * a different request is refused (422); a retry while the first is still running is refused (409).
 * Errors are not kept: retrying a refused request tries again. Keys are scoped by token.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { HttpProblem } from './problems.js';

export interface StoredResponse {
  status: number;
  headers: Record<string, string>;
  body: unknown;
}

interface Record_ {
  fingerprint: string;
  storedAt: number;
  response: StoredResponse;
}

export const idempotencyKeyPattern = /^[\x21-\x7e]{1,255}$/;

export class IdempotencyStore {
  private readonly running = new Set<string>();

  constructor(
    private readonly dir: string,
    private readonly ttlMs = 24 * 60 * 60 * 1000,
  ) {}

  /**
   * Runs `execute` once per (scope, key): replays a kept response for a matching retry.
   * `fingerprint` identifies the request (method, path and body).
   */
  async run(
    scope: string,
    key: string,
    fingerprint: string,
    execute: () => Promise<StoredResponse>,
  ): Promise<{ response: StoredResponse; replayed: boolean }> {
    if (!idempotencyKeyPattern.test(key)) {
      throw new HttpProblem('BAD_REQUEST', 'Idempotency-Key must be 1 to 255 printable ASCII characters');
    }
    const id = createHash('sha256').update(`${scope}\u0000${key}`).digest('hex');
    const kept = this.read(id);
    if (kept) {
      if (kept.fingerprint !== fingerprint) {
        throw new HttpProblem(
          'IDEMPOTENCY_KEY_REUSED',
          'this Idempotency-Key was already used for a different request; use a new key for a new request',
        );
      }
      return { response: kept.response, replayed: true };
    }
    if (this.running.has(id)) {
      throw new HttpProblem(
        'IDEMPOTENCY_KEY_IN_USE',
        'a request with this Idempotency-Key is still being processed; retry when it has answered',
      );
    }
    this.running.add(id);
    try {
      const response = await execute();
      if (response.status >= 200 && response.status < 300) {
        this.write(id, { fingerprint, storedAt: Date.now(), response });
      }
      return { response, replayed: false };
    } finally {
      this.running.delete(id);
    }
  }

  private file(id: string): string {
    return path.join(this.dir, `${id}.json`);
  }

  private read(id: string): Record_ | null {
    let record: Record_;
    try {
      record = JSON.parse(readFileSync(this.file(id), 'utf8')) as Record_;
    } catch {
      return null;
    }
    if (Date.now() - record.storedAt > this.ttlMs) {
      rmSync(this.file(id), { force: true });
      return null;
    }
    return record;
  }

  private write(id: string, record: Record_): void {
    mkdirSync(this.dir, { recursive: true });
    const tmp = `${this.file(id)}.${process.pid}.tmp`;
    writeFileSync(tmp, JSON.stringify(record));
    renameSync(tmp, this.file(id));
  }
}
