/**
 * A plan's pull-request comment shown as a code host renders it. Only the markdown that
 * views/render-plan-markdown.ts writes is understood (headings, tables, numbered lists, bold, code,
 * and its <details>, <summary>, <sub>, <code>, <b>, <br> tags). The HTML made from it is parsed
 * inert (DOMParser: no script runs, nothing loads) and rebuilt from a list of allowed tags without
 * any attribute, so whatever a plan's text holds shows as text.
 */
import { type ComponentChild, h } from 'preact';

const allowed = new Set([
  'h3',
  'p',
  'table',
  'thead',
  'tbody',
  'tr',
  'th',
  'td',
  'details',
  'summary',
  'sub',
  'code',
  'b',
  'strong',
  'ol',
  'li',
  'br',
]);

function escapeHtml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** `**bold**` and `` `code` `` (a code span's text is literal: escaped). */
function inline(text: string): string {
  return text
    .split(/(`[^`]*`)/)
    .map((part) =>
      part.startsWith('`') && part.endsWith('`') && part.length >= 2
        ? `<code>${escapeHtml(part.slice(1, -1))}</code>`
        : part.replace(/\*\*([^*]+)\*\*/g, '<strong>$1</strong>'),
    )
    .join('');
}

function cells(line: string): string[] {
  return line
    .trim()
    .replace(/^\||\|$/g, '')
    .split('|')
    .map((c) => inline(c.trim()));
}

/** The markdown as HTML text (to be parsed inert, then filtered). */
export function markdownHtml(markdown: string): string {
  const lines = markdown.split('\n');
  const out: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] as string;
    if (line.trim() === '') continue;
    if (line.startsWith('### ')) {
      out.push(`<h3>${inline(line.slice(4))}</h3>`);
    } else if (line.startsWith('|') && /^\|[-| :]+\|$/.test(lines[i + 1]?.trim() ?? '')) {
      const head = cells(line);
      const rows: string[][] = [];
      for (i += 2; i < lines.length && (lines[i] as string).startsWith('|'); i++)
        rows.push(cells(lines[i] as string));
      i -= 1;
      out.push(
        `<table><thead><tr>${head.map((c) => `<th>${c}</th>`).join('')}</tr></thead><tbody>${rows
          .map((r) => `<tr>${r.map((c) => `<td>${c}</td>`).join('')}</tr>`)
          .join('')}</tbody></table>`,
      );
    } else if (/^\d+\. /.test(line)) {
      const items: string[] = [];
      for (; i < lines.length && /^\d+\. /.test(lines[i] as string); i++)
        items.push(`<li>${inline((lines[i] as string).replace(/^\d+\. /, ''))}</li>`);
      i -= 1;
      out.push(`<ol>${items.join('')}</ol>`);
    } else if (/^<\/?(details|summary)\b/.test(line)) {
      out.push(inline(line));
    } else {
      out.push(`<p>${inline(line)}</p>`);
    }
  }
  return out.join('\n');
}

function rebuild(node: Node, key: number): ComponentChild {
  if (node.nodeType === Node.TEXT_NODE) return node.textContent;
  if (node.nodeType !== Node.ELEMENT_NODE) return null;
  const children = [...node.childNodes].map(rebuild);
  const tag = (node as Element).tagName.toLowerCase();
  // A tag not on the list keeps its text, never itself.
  return allowed.has(tag) ? h(tag, { key }, ...children) : children;
}

export function Markdown({ text }: { text: string }) {
  const body = new DOMParser().parseFromString(markdownHtml(text), 'text/html').body;
  return <div class="rendered-markdown">{[...body.childNodes].map(rebuild)}</div>;
}
