/** Terminal styling that renderers receive as a value, so they stay pure and testable. */
export interface Style {
  green(text: string): string;
  yellow(text: string): string;
  red(text: string): string;
  bold(text: string): string;
  dim(text: string): string;
}

const wrap = (open: number, close: number) => (text: string) => `\u001b[${open}m${text}\u001b[${close}m`;

export const colorStyle: Style = {
  green: wrap(32, 39),
  yellow: wrap(33, 39),
  red: wrap(31, 39),
  bold: wrap(1, 22),
  dim: wrap(2, 22),
};

const identity = (text: string) => text;
export const plainStyle: Style = {
  green: identity,
  yellow: identity,
  red: identity,
  bold: identity,
  dim: identity,
};

/** Colour on a terminal only, and never when NO_COLOR is set (https://no-color.org). */
export function styleFor(stream: { isTTY?: boolean }, env: NodeJS.ProcessEnv = process.env): Style {
  const noColor = env.NO_COLOR !== undefined && env.NO_COLOR !== '';
  return stream.isTTY && !noColor && env.TERM !== 'dumb' ? colorStyle : plainStyle;
}
