/**
 * The dashboard's shell: who is signed in, the navigation and the page the address names. A
 * session is the token (or none, when the server checks no token) and what the server says of it
 * (`GET /v1/whoami`): a viewer sees every page without the action buttons.
 */
import { useCallback, useEffect, useState } from 'preact/hooks';
import { ApiError, Client } from './api.js';
import { EnvironmentsPage } from './pages/environments.js';
import { HistoryPage } from './pages/history.js';
import { MigrationPage } from './pages/migration.js';
import { PlanPage } from './pages/plan.js';
import { SignInPage } from './pages/sign-in.js';
import { href, type Route, useRoute } from './route.js';
import { forgetToken, savedToken, saveToken } from './session.js';
import type { Session } from './session-type.js';
import type { Whoami } from './types.js';

type Gate =
  | { kind: 'checking' }
  | { kind: 'signed-out'; problem: string | null }
  | { kind: 'in'; session: Session };

export function App() {
  const [gate, setGate] = useState<Gate>({ kind: 'checking' });
  const route = useRoute();

  const signOut = useCallback((problem: string | null) => {
    forgetToken();
    setGate({ kind: 'signed-out', problem });
  }, []);

  const signIn = useCallback(
    async (token: string | null, fromUser: boolean) => {
      const client = new Client(token, () => signOut('The server refused the token: sign in again.'));
      try {
        const who = await client.get<Whoami>('/v1/whoami');
        if (token !== null) saveToken(token);
        setGate({ kind: 'in', session: { client, who } });
      } catch (error) {
        forgetToken();
        const refused = error instanceof ApiError && error.status === 401;
        const problem = refused
          ? fromUser || token !== null
            ? 'The server refused this token: check it and try again.'
            : null
          : `The server could not be reached: ${(error as Error).message}`;
        setGate({ kind: 'signed-out', problem });
      }
    },
    [signOut],
  );

  useEffect(() => {
    void signIn(savedToken(), false);
  }, [signIn]);

  if (gate.kind === 'checking') return <p class="loading">Signing in…</p>;
  if (gate.kind === 'signed-out') {
    return <SignInPage problem={gate.problem} onToken={(token) => void signIn(token, true)} />;
  }
  const { session } = gate;
  return (
    <>
      <header class="top">
        <a class="brand" href="#/">
          cutover
        </a>
        <nav aria-label="Pages">
          <NavLink route={{ page: 'environments' }} current={route} label="Environments" />
          <NavLink route={{ page: 'history', environment: '', state: '' }} current={route} label="History" />
          <NavLink route={{ page: 'plan' }} current={route} label="Plan" />
        </nav>
        <span class="who">
          {session.who.auth ? `${session.who.name} (${session.who.role})` : 'no sign-in (loopback server)'}
        </span>
        {session.who.auth && (
          <button type="button" class="quiet" onClick={() => signOut(null)}>
            Sign out
          </button>
        )}
      </header>
      <main id="main">{page(route, session)}</main>
    </>
  );
}

function page(route: Route, session: Session) {
  switch (route.page) {
    case 'environments':
      return <EnvironmentsPage session={session} />;
    case 'migration':
      return <MigrationPage key={route.id} id={route.id} session={session} />;
    case 'history':
      return <HistoryPage session={session} environment={route.environment} state={route.state} />;
    case 'plan':
      return <PlanPage session={session} />;
    default: {
      const never: never = route;
      return never;
    }
  }
}

function NavLink({ route, current, label }: { route: Route; current: Route; label: string }) {
  const here = route.page === current.page;
  return (
    <a href={href(route)} aria-current={here ? 'page' : undefined}>
      {label}
    </a>
  );
}
