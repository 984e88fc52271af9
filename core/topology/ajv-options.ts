import type { Options } from 'ajv';

/** One set of options for the validator compiled at build time and the one compiled at run time. */
export const ajvOptions: Options = { allErrors: true, verbose: true, strict: true, allowUnionTypes: true };
