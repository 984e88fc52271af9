import { Argument, type Command } from 'commander';
import { type CompletionShell, completionScript, completionShells } from '../completion.js';
import type { CommandRun } from '../context.js';

/**
 * `cutover completion <shell>`: prints the shell's completion script for every command. `whole`
 * builds the whole program (this run loaded only this command's module).
 */
export function registerCompletion(program: Command, run: CommandRun, whole: () => Promise<Command>): void {
  program
    .command('completion')
    .description('print a shell completion script (bash, zsh or fish) for every command and option')
    .addArgument(new Argument('<shell>', 'the shell').choices(completionShells))
    .addHelpText(
      'after',
      `
Install it where your shell looks for completions, then open a new shell:
  $ cutover completion bash > ~/.local/share/bash-completion/completions/cutover
  $ cutover completion zsh > "\${fpath[1]}/_cutover"     # a directory of your $fpath
  $ cutover completion fish > ~/.config/fish/completions/cutover.fish

Or for the current shell only:
  $ source <(cutover completion bash)`,
    )
    .action(
      run.action(async (shell: CompletionShell) => {
        run.stdout.write(completionScript(await whole(), shell));
        return 0;
      }),
    );
}
