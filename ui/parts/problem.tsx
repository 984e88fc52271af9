import { ApiError } from '../api.js';

/** An error as the user reads it: the server's code and detail, or what went wrong on the way. */
export function ProblemLine({ error }: { error: Error | null }) {
  if (error === null) return null;
  const text =
    error instanceof ApiError
      ? `${error.code}: ${error.detail}`
      : `The server could not be reached: ${error.message}`;
  return (
    <p class="problem" role="alert">
      {text}
    </p>
  );
}
