import type { Client } from './api.js';
import type { Whoami } from './types.js';

/** Who is signed in: the client that sends their token, and what the server says of it. */
export interface Session {
  client: Client;
  who: Whoami;
}
