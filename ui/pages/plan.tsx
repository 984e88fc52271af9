/**
 * A plan for a topology pasted here, against the layout the server has recorded (POST /v1/plan,
 * which changes nothing), shown as its pull-request comment renders (`plan --format markdown`),
 * with that markdown and the plan as `cutover topology plan` prints it below: the CLI's renderers.
 */
import { useState } from 'preact/hooks';
import { renderPlanMarkdown } from '../../views/render-plan-markdown.js';
import { renderPlanText } from '../../views/render-plan-text.js';
import { plainStyle } from '../../views/style.js';
import { ApiError } from '../api.js';
import { Markdown } from '../parts/markdown.js';
import type { Session } from '../session-type.js';
import type { Plan } from '../types.js';

export function PlanPage({ session }: { session: Session }) {
  const [text, setText] = useState('');
  const [path, setPath] = useState('topology.yaml');
  const [result, setResult] = useState<{ text: string; markdown: string } | { problem: string } | null>(null);
  const [busy, setBusy] = useState(false);
  const plan = async () => {
    setBusy(true);
    try {
      const p = await session.client.post<Plan>('/v1/plan', { topology: text, path });
      setResult({ text: renderPlanText(p, { style: plainStyle }), markdown: renderPlanMarkdown(p) });
    } catch (error) {
      if (error instanceof ApiError) setResult({ problem: `${error.code}: ${error.detail}` });
      else setResult({ problem: (error as Error).message });
    } finally {
      setBusy(false);
    }
  };
  return (
    <>
      <h1>Plan</h1>
      <p>
        Paste a topology file: the server plans it against the layout it has recorded (nothing is changed) and
        the plan shows as its pull-request comment reads.
      </p>
      <form
        class="plan-form"
        onSubmit={(e) => {
          e.preventDefault();
          void plan();
        }}
      >
        <label for="plan-path">Path (relative to the server's --workdir)</label>
        <input id="plan-path" value={path} onInput={(e) => setPath((e.target as HTMLInputElement).value)} />
        <label for="plan-topology">Topology</label>
        <textarea
          id="plan-topology"
          rows={14}
          spellcheck={false}
          value={text}
          onInput={(e) => setText((e.target as HTMLTextAreaElement).value)}
        />
        <button type="submit" disabled={busy || text.trim() === ''}>
          Plan
        </button>
      </form>
      {result && 'problem' in result && (
        <p class="problem" role="alert">
          {result.problem}
        </p>
      )}
      {result && 'markdown' in result && (
        <>
          <section
            class="card"
            aria-label="The plan as its pull-request comment renders"
            data-field="plan-rendered"
          >
            <Markdown text={result.markdown} />
          </section>
          <details>
            <summary>The pull-request comment (markdown, to copy)</summary>
            <pre class="markdown" data-field="markdown">
              {result.markdown}
            </pre>
          </details>
          <details>
            <summary>As the CLI prints it</summary>
            <pre class="plan-text" data-field="plan">
              {result.text}
            </pre>
          </details>
        </>
      )}
    </>
  );
}
