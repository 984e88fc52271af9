import { closeSync, fsyncSync, ftruncateSync, openSync, readFileSync, writeSync } from 'node:fs';
import { CutoverError } from '../errors.js';
import type { MigrationEvent } from '../migration/types.js';

export interface JournalContents {
  events: MigrationEvent[];
  /** Bytes of whole lines; anything after is a torn last line from a crash mid-write. */
  validBytes: number;
  torn: boolean;
}

/**
 * Reads a journal. A last line cut short by a crash (no newline, or not JSON) is ignored: its event
 * was never acknowledged, since an event counts only once its line is fsync'd whole. A bad line
 * anywhere else means the file was damaged, and is an error.
 */
export function readJournal(file: string): JournalContents {
  const buffer = readFileSync(file);
  const events: MigrationEvent[] = [];
  let offset = 0;
  let lineNo = 0;
  while (offset < buffer.length) {
    const end = buffer.indexOf(0x0a, offset);
    lineNo++;
    if (end === -1) return { events, validBytes: offset, torn: true };
    const line = buffer.subarray(offset, end).toString('utf8');
    try {
      events.push(JSON.parse(line) as MigrationEvent);
    } catch {
      if (end + 1 >= buffer.length) return { events, validBytes: offset, torn: true };
      throw new CutoverError('STATE_CORRUPT', `${file}:${lineNo}: journal line is not valid JSON`);
    }
    offset = end + 1;
  }
  return { events, validBytes: offset, torn: false };
}

/**
 * An open journal for appending. Every append is written whole and fsync'd before it returns: an
 * event is durable before anything acts on it or anyone is told about it.
 */
export class JournalWriter {
  private fd: number;

  private constructor(
    readonly file: string,
    fd: number,
  ) {
    this.fd = fd;
  }

  /** Creates a new journal; fails if one exists (two migrations never share an id). */
  static create(file: string, first: MigrationEvent): JournalWriter {
    const writer = new JournalWriter(file, openSync(file, 'wx'));
    writer.append(first);
    return writer;
  }

  /** Opens an existing journal to continue it, cutting off a torn last line first. */
  static resume(file: string, contents: JournalContents): JournalWriter {
    const fd = openSync(file, 'r+');
    if (contents.torn) {
      ftruncateSync(fd, contents.validBytes);
      fsyncSync(fd);
    }
    const writer = new JournalWriter(file, fd);
    writer.position = contents.validBytes;
    return writer;
  }

  private position = 0;

  append(event: MigrationEvent): void {
    const bytes = Buffer.from(`${JSON.stringify(event)}\n`, 'utf8');
    let written = 0;
    while (written < bytes.length) {
      written += writeSync(this.fd, bytes, written, bytes.length - written, this.position + written);
    }
    this.position += bytes.length;
    fsyncSync(this.fd);
  }

  close(): void {
    if (this.fd >= 0) {
      closeSync(this.fd);
      this.fd = -1;
    }
  }
}
