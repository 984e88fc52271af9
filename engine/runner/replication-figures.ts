/**
 * The live replication figures of a migration (core/migration/replication-lag.ts), kept beside
 * its journal in `replication.json`: written by the process driving it, read by `migration show`,
 * `topology status` and the API. Replaced whole each time (temp file, rename: a reader sees the
 * old figures or the new); not fsync'd, as it is not the record (the journal is).
 */
import { readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import type { ReplicationFigure } from '../../core/migration/replication-lag.js';

interface FiguresFile {
  figures: ReplicationFigure[];
}

/** Keeps the last figure of each component and writes them all; a refusal of the disk costs the figure only. */
export function replicationFigureWriter(file: string): (figure: ReplicationFigure) => void {
  const figures = new Map<string, ReplicationFigure>();
  return (figure) => {
    figures.set(figure.component, figure);
    const body: FiguresFile = {
      figures: [...figures.values()].sort((a, b) => (a.component < b.component ? -1 : 1)),
    };
    const temp = `${file}.${process.pid}.tmp`;
    try {
      writeFileSync(temp, `${JSON.stringify(body)}\n`, { mode: 0o600 });
      renameSync(temp, file);
    } catch {
      rmSync(temp, { force: true });
    }
  };
}

/** The figures written for a migration; none when there is no file or it cannot be read. */
export function readReplicationFigures(file: string): ReplicationFigure[] {
  try {
    const parsed = JSON.parse(readFileSync(file, 'utf8')) as Partial<FiguresFile>;
    return Array.isArray(parsed.figures) ? parsed.figures : [];
  } catch {
    return [];
  }
}
