import fc from 'fast-check';

/**
 * Property tests explore new random cases on every local run; in CI (CI=true) they run with a
 * fixed seed, so a submission lands or not on its own merits rather than on a draw. Set
 * FC_SEED to replay a counterexample's seed anywhere.
 */
const seed = process.env.FC_SEED ?? (process.env.CI ? '20261122' : undefined);
if (seed !== undefined) fc.configureGlobal({ seed: Number(seed) });
