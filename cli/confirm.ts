import { createInterface } from 'node:readline/promises';
import { CutoverError } from '../core/errors.js';
import type { CommandContext } from './context.js';

/** Asks on the terminal; only the word `yes` confirms, as with `terraform apply`. */
export async function confirm(
  question: string,
  context: Pick<CommandContext, 'stdin' | 'stderr'>,
): Promise<boolean> {
  const rl = createInterface({ input: context.stdin, output: context.stderr });
  try {
    const answer = await rl.question(
      `${question}\n  Only 'yes' will be accepted to approve.\n\n  Enter a value: `,
    );
    return answer.trim() === 'yes';
  } finally {
    rl.close();
  }
}

/**
 * The confirmation of a command that changes what runs (`migrate`, `down`): --yes, or a `yes` on
 * the terminal. Refused (USAGE, exit 1) when neither can be had; false when declined.
 * `doing`: the refusal's words, e.g. "migrate", "take environment shop down".
 */
export async function confirmedOrRefused(
  yes: boolean | undefined,
  doing: string,
  question: string,
  context: Pick<CommandContext, 'stdin' | 'stderr'>,
): Promise<boolean> {
  if (yes) return true;
  if (!context.stdin.isTTY) {
    throw new CutoverError(
      'USAGE',
      `refusing to ${doing} without confirmation: standard input is not a terminal; pass --yes`,
    );
  }
  return confirm(question, context);
}
