import { closeSync, fsyncSync, ftruncateSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import path from 'node:path';
import { CutoverError, environmentFault } from '../../core/errors.js';
import type { MigrationEvent } from '../../core/migration/types.js';

export interface JournalContents {
  events: MigrationEvent[];
  /** Bytes of whole lines; anything after is a torn last line from a crash mid-write. */
  validBytes: number;
  torn: boolean;
}

/**
 * Reads a journal. A last line cut short by a crash (no newline, or not JSON) is ignored: its event
 * was never acknowledged, since an event counts only once its line is fsync'd whole. A bad line
 * anywhere else means the file was damaged, and is an error naming the file and line; so is a
 * journal without its first line (`created`): a migration whose creation never became durable.
 */
export function readJournal(file: string): JournalContents {
  const buffer = readFileSync(file);
  const events: MigrationEvent[] = [];
  let offset = 0;
  let lineNo = 0;
  while (offset < buffer.length) {
    const end = buffer.indexOf(0x0a, offset);
    lineNo++;
    if (end === -1) {
      checkFirstLine(file, events);
      return { events, validBytes: offset, torn: true };
    }
    const line = buffer.subarray(offset, end).toString('utf8');
    try {
      events.push(JSON.parse(line) as MigrationEvent);
    } catch {
      if (end + 1 >= buffer.length) {
        checkFirstLine(file, events);
        return { events, validBytes: offset, torn: true };
      }
      throw new CutoverError(
        'STATE_CORRUPT',
        `${file}:${lineNo}: journal line is not valid JSON (the file was damaged); restore it from a backup, or move ${path.dirname(file)} aside to set this migration apart`,
      );
    }
    offset = end + 1;
  }
  checkFirstLine(file, events);
  return { events, validBytes: offset, torn: false };
}

function checkFirstLine(file: string, events: MigrationEvent[]): void {
  if (events[0]?.type === 'created') return;
  throw new CutoverError(
    'STATE_CORRUPT',
    events.length === 0
      ? `${file}: the journal is empty: the migration was interrupted while being created and never ran; remove ${path.dirname(file)}`
      : `${file}:1: the journal does not start with the migration's creation (the file was damaged); restore it from a backup, or move ${path.dirname(file)} aside`,
  );
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

  /**
   * Creates a new journal; fails if one exists (two migrations never share an id). A journal whose
   * first line cannot be written is removed: that migration was never created.
   */
  static create(file: string, first: MigrationEvent): JournalWriter {
    const writer = new JournalWriter(
      file,
      // 0600: the first line holds the topology, whose hook and notify URLs may carry credentials.
      diskCall(file, 'creating', () => openSync(file, 'wx', 0o600)),
    );
    try {
      writer.append(first);
    } catch (error) {
      writer.close();
      try {
        unlinkSync(file);
      } catch {
        // a journal without its first line is reported as such (readJournal) wherever it is read
      }
      throw error;
    }
    return writer;
  }

  /** Opens an existing journal to continue it, cutting off a torn last line first. */
  static resume(file: string, contents: JournalContents): JournalWriter {
    const fd = diskCall(file, 'opening', () => openSync(file, 'r+'));
    const writer = new JournalWriter(file, fd);
    if (contents.torn) {
      try {
        diskCall(file, 'repairing the torn last line of', () => {
          ftruncateSync(fd, contents.validBytes);
          fsyncSync(fd);
        });
      } catch (error) {
        writer.close();
        throw error;
      }
    }
    writer.position = contents.validBytes;
    return writer;
  }

  private position = 0;

  /**
   * Throws an ENVIRONMENT_FAULT naming the journal when the disk refuses; the event is then not
   * acknowledged (a part written is a torn last line, cut off when the journal is resumed).
   */
  append(event: MigrationEvent): void {
    const bytes = Buffer.from(`${JSON.stringify(event)}\n`, 'utf8');
    diskCall(this.file, 'appending to', () => {
      let written = 0;
      while (written < bytes.length) {
        written += writeSync(this.fd, bytes, written, bytes.length - written, this.position + written);
      }
      fsyncSync(this.fd);
    });
    this.position += bytes.length;
  }

  close(): void {
    if (this.fd >= 0) {
      closeSync(this.fd);
      this.fd = -1;
    }
  }
}

/** Runs a call on the journal; a refusal of the machine becomes one line naming the journal. */
function diskCall<T>(file: string, doing: string, call: () => T): T {
  try {
    return call();
  } catch (error) {
    throw environmentFault(error, `${doing} ${file}`) ?? error;
  }
}
