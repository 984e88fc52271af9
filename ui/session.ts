/**
 * The signed-in token, kept in this tab's sessionStorage only: gone when the tab closes, never in
 * a URL, a cookie or localStorage, so it is not sent anywhere but in the Authorization header.
 */
const key = 'cutover.token';

export function savedToken(): string | null {
  try {
    return sessionStorage.getItem(key);
  } catch {
    return null; // storage refused (a private mode): the user signs in again
  }
}

export function saveToken(token: string): void {
  try {
    sessionStorage.setItem(key, token);
  } catch {
    // kept in memory only for this page
  }
}

export function forgetToken(): void {
  try {
    sessionStorage.removeItem(key);
  } catch {
    // nothing kept
  }
}
