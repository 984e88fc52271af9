import { createInterface } from 'node:readline/promises';

/** Asks on the terminal; only the word `yes` confirms, as with `terraform apply`. */
export async function confirm(question: string): Promise<boolean> {
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    const answer = await rl.question(
      `${question}\n  Only 'yes' will be accepted to approve.\n\n  Enter a value: `,
    );
    return answer.trim() === 'yes';
  } finally {
    rl.close();
  }
}
