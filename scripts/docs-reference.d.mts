/** Types of scripts/docs-reference.mjs, for test/docs.test.ts. */
import type { CommandContext } from '../cli/context.js';

type Main = (argv: string[], context: CommandContext) => Promise<number>;

export declare function topologySchemas(): Record<string, unknown>;
export declare function topologyFieldPaths(schemas: Record<string, unknown>): string[];
export declare function topologyReference(schemas: Record<string, unknown>): string;
export declare function cliReference(main: Main): Promise<string>;
export declare function apiReference(doc: unknown): string;
export declare function openApiDocument(modules: {
  buildServer: (options: never) => Promise<{ app: { swagger(): unknown }; close(): Promise<void> }>;
  StateDir: { at(dir: string): unknown };
}): Promise<unknown>;
export declare function generatedPages(sources: {
  main: Main;
  openapi: unknown;
}): Promise<Record<string, string>>;
