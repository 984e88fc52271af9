import { useState } from 'preact/hooks';

/** The token is asked for here, kept in this tab's session only, and sent as a bearer header. */
export function SignInPage({
  problem,
  onToken,
}: {
  problem: string | null;
  onToken: (token: string) => void;
}) {
  const [token, setToken] = useState('');
  return (
    <main id="main" class="sign-in">
      <h1>Sign in to cutover</h1>
      <p>
        Paste a token of this server (<code>--tokens-file</code> or <code>CUTOVER_TOKENS</code>). It stays in
        this tab only and is sent to this server alone.
      </p>
      {problem && (
        <p class="problem" role="alert">
          {problem}
        </p>
      )}
      <form
        onSubmit={(event) => {
          event.preventDefault();
          if (token.trim() !== '') onToken(token.trim());
        }}
      >
        <label for="token">Token</label>
        <input
          id="token"
          name="token"
          type="password"
          autocomplete="off"
          value={token}
          onInput={(event) => setToken((event.target as HTMLInputElement).value)}
        />
        <button type="submit">Sign in</button>
      </form>
    </main>
  );
}
