/**
 * Shell completion scripts (`cutover completion bash|zsh|fish`), generated from the program's own
 * commands and options, so they cannot drift from them. The scripts are static: a TAB runs no
 * cutover process (a dynamic completer, as @bomb.sh/tab or tabtab make, starts Node at every TAB:
 * about 0.1 s each here). Commands hidden from help are left out; an option's choices are offered
 * after it; any other option value, and a command's arguments, complete as file names.
 */
import type { Command, Option } from 'commander';

export const completionShells = ['bash', 'zsh', 'fish'] as const;
export type CompletionShell = (typeof completionShells)[number];

/** One command of the tree: its path ("/topology/plan"; "" for the program), words and options. */
interface Node {
  path: string;
  description: string;
  subcommands: { name: string; description: string }[];
  options: {
    flags: string[];
    long?: string;
    short?: string;
    takesValue: boolean;
    choices: string[];
    description: string;
  }[];
}

function nodesOf(command: Command, path = ''): Node[] {
  const help = command.createHelp();
  const visible = help.visibleCommands(command).filter((c) => c.name() !== 'help');
  const options = help.visibleOptions(command).map((o: Option) => ({
    flags: [o.long, o.short].filter((f): f is string => f !== undefined),
    ...(o.long === undefined ? {} : { long: o.long }),
    ...(o.short === undefined ? {} : { short: o.short }),
    takesValue: o.required || o.optional,
    choices: o.argChoices ?? [],
    description: o.description,
  }));
  const node: Node = {
    path,
    description: command.description(),
    subcommands: visible.map((c) => ({ name: c.name(), description: c.description() })),
    options,
  };
  return [node, ...visible.flatMap((c) => nodesOf(c, `${path}/${c.name()}`))];
}

/** The completion script for `shell` of the program `program`, named `name` on the command line. */
export function completionScript(program: Command, shell: CompletionShell, name = 'cutover'): string {
  const nodes = nodesOf(program);
  switch (shell) {
    case 'bash':
      return `# ${name} completion for bash: ${name} completion bash > ~/.local/share/bash-completion/completions/${name}\n${bashFunction(nodes, name)}complete -o default -F _${fn(name)} ${name}\n`;
    case 'zsh':
      // zsh runs the bash function through its bash completion layer (bashcompinit).
      return `#compdef ${name}\n# ${name} completion for zsh: ${name} completion zsh > "\${fpath[1]}/_${name}"\nautoload -U +X bashcompinit && bashcompinit\n${bashFunction(nodes, name)}complete -o default -F _${fn(name)} ${name}\n`;
    case 'fish':
      return fishScript(nodes, name);
  }
}

const fn = (name: string) => name.replace(/[^A-Za-z0-9_]/g, '_');
/** A word inside single quotes of any of the three shells. */
const quoted = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`;
/** The same, for fish (where \\' ends nothing: backslash escapes inside single quotes). */
const fishQuoted = (text: string) => `'${text.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
const oneLine = (text: string) => text.split('\n')[0]?.replace(/\s+/g, ' ').trim() ?? '';

function bashFunction(nodes: Node[], name: string): string {
  const paths = nodes.filter((n) => n.path !== '').map((n) => quoted(n.path));
  const valueCases: string[] = [];
  const wordCases: string[] = [];
  for (const node of nodes) {
    for (const option of node.options.filter((o) => o.takesValue)) {
      const patterns = option.flags.map((f) => quoted(`${node.path} ${f}`)).join('|');
      valueCases.push(
        option.choices.length > 0
          ? `    ${patterns}) COMPREPLY=($(compgen -W ${quoted(option.choices.join(' '))} -- "$cur")); return ;;`
          : `    ${patterns}) return ;;`,
      );
    }
    const options = node.options.flatMap((o) => o.flags).join(' ');
    const commands = node.subcommands.map((s) => s.name).join(' ');
    wordCases.push(`    ${quoted(node.path)}) options=${quoted(options)}; commands=${quoted(commands)} ;;`);
  }
  return `_${fn(name)}() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" prev="" path="" word i options="" commands=""
  [ "$COMP_CWORD" -gt 0 ] && prev="\${COMP_WORDS[COMP_CWORD-1]}"
  for ((i = 1; i < COMP_CWORD; i++)); do
    word="\${COMP_WORDS[i]}"
    case "$path/$word" in
      ${paths.join('|')}) path="$path/$word" ;;
    esac
  done
  COMPREPLY=()
  case "$path $prev" in
${valueCases.join('\n')}
  esac
  case "$path" in
${wordCases.join('\n')}
  esac
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$options" -- "$cur"))
  elif [ -n "$commands" ]; then
    COMPREPLY=($(compgen -W "$commands" -- "$cur"))
  fi
}
`;
}

function fishScript(nodes: Node[], name: string): string {
  const f = fn(name);
  const lines = [
    `# ${name} completion for fish: ${name} completion fish > ~/.config/fish/completions/${name}.fish`,
    `set -g __${f}_paths ${nodes
      .filter((n) => n.path !== '')
      .map((n) => fishQuoted(n.path))
      .join(' ')}`,
    `function __${f}_at --description 'the command line names this ${name} command'`,
    '    set -l path ""',
    '    for word in (commandline -opc)[2..-1]',
    `        if contains -- "$path/$word" $__${f}_paths`,
    '            set path "$path/$word"',
    '        end',
    '    end',
    '    test "$path" = "$argv[1]"',
    'end',
    `complete -c ${name} -e`,
  ];
  for (const node of nodes) {
    const at = `-n ${fishQuoted(`__${f}_at ${fishQuoted(node.path)}`)}`;
    // A command with subcommands takes no file; one without completes its arguments as files.
    for (const sub of node.subcommands) {
      lines.push(
        `complete -c ${name} ${at} -f -a ${fishQuoted(sub.name)} -d ${fishQuoted(oneLine(sub.description))}`,
      );
    }
    for (const option of node.options) {
      const flags = [
        option.long === undefined ? '' : `-l ${fishQuoted(option.long.replace(/^--/, ''))}`,
        option.short === undefined ? '' : `-s ${fishQuoted(option.short.replace(/^-/, ''))}`,
      ].filter(Boolean);
      const value = option.takesValue
        ? option.choices.length > 0
          ? ` -x -a ${fishQuoted(option.choices.join(' '))}`
          : ' -r'
        : '';
      lines.push(
        `complete -c ${name} ${at} ${flags.join(' ')}${value} -d ${fishQuoted(oneLine(option.description))}`,
      );
    }
  }
  return `${lines.join('\n')}\n`;
}
