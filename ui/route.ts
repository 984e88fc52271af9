/**
 * Where the dashboard is: the part of the address after `#` (`#/migrations/mig_…`), so the server
 * serves one page at /ui and every view has an address a person can share (with no token in it).
 */
import { useEffect, useState } from 'preact/hooks';

export type Route =
  | { page: 'environments' }
  | { page: 'migration'; id: string }
  | { page: 'history'; environment: string; state: string }
  | { page: 'plan' };

export function parseRoute(hash: string): Route {
  const [path = '', query = ''] = hash.replace(/^#/, '').split('?');
  const params = new URLSearchParams(query);
  const migration = /^\/migrations\/(mig_[a-z0-9]+)$/i.exec(path);
  if (migration?.[1]) return { page: 'migration', id: migration[1] };
  if (path === '/history') {
    return {
      page: 'history',
      environment: params.get('environment') ?? '',
      state: params.get('state') ?? '',
    };
  }
  if (path === '/plan') return { page: 'plan' };
  return { page: 'environments' };
}

export function href(route: Route): string {
  switch (route.page) {
    case 'environments':
      return '#/';
    case 'migration':
      return `#/migrations/${route.id}`;
    case 'history': {
      const params = new URLSearchParams();
      if (route.environment !== '') params.set('environment', route.environment);
      if (route.state !== '') params.set('state', route.state);
      const query = params.toString();
      return query === '' ? '#/history' : `#/history?${query}`;
    }
    case 'plan':
      return '#/plan';
    default: {
      const never: never = route;
      return never;
    }
  }
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.hash));
  useEffect(() => {
    const onChange = () => setRoute(parseRoute(location.hash));
    addEventListener('hashchange', onChange);
    return () => removeEventListener('hashchange', onChange);
  }, []);
  return route;
}
