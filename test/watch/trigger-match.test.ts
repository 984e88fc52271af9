/**
 * Which watcher a webhook trigger is for (watch/hook-triggers.ts): a pure unit test of the
 * matching of the names a push gives its repository (clone, SSH and web URLs, full name) to a
 * watcher's remote URL, in the forms Git hosts and users write them.
 */
import { expect, it } from 'vitest';
import { type Trigger, triggerMatcher } from '../../watch/hook-triggers.js';

const github = {
  clone_url: 'https://github.com/Acme/App.git',
  ssh_url: 'git@github.com:Acme/App.git',
  html_url: 'https://github.com/Acme/App',
  full_name: 'Acme/App',
};
const trigger = (names: string[]): Trigger => ({ file: '/nowhere', note: '', names });

it("matches a watcher's remote in any of the forms a push names it, and nothing else", () => {
  for (const remote of [
    'https://github.com/acme/app',
    'https://github.com/acme/app.git/',
    'git@github.com:acme/app.git',
    'ssh://git@github.com:22/acme/app.git',
    'https://token@github.com/Acme/App.git',
  ]) {
    expect(triggerMatcher([remote])(trigger(Object.values(github))), remote).toBe(true);
    // One name is enough: the full name alone, or the SSH URL alone.
    expect(triggerMatcher([remote])(trigger([github.full_name])), remote).toBe(true);
    expect(triggerMatcher([remote])(trigger([github.ssh_url])), remote).toBe(true);
  }
  for (const remote of [
    'https://github.com/acme/app-two',
    'https://github.com/other/app',
    'https://gitlab.com/acme/app-ci',
    'file:///srv/git/app.git',
  ]) {
    expect(triggerMatcher([remote])(trigger(Object.values(github))), remote).toBe(false);
  }
});

it('matches a local repository by its path, and a trigger naming none matches every watcher', () => {
  const local = triggerMatcher(['/srv/work/app', '/srv/work/app/.git']);
  expect(local(trigger(['file:///srv/work/app']))).toBe(true);
  expect(local(trigger(['file:///srv/work/app/.git/']))).toBe(true);
  expect(local(trigger(['file:///srv/work/other.git', 'acme/app']))).toBe(false);
  expect(local(trigger([]))).toBe(true);
});
