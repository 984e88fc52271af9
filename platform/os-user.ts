import { userInfo } from 'node:os';

/**
 * Who runs this process, for the audit of the migrations it starts: the OS user's name, else
 * $USER, else "uid N" (a container's user may have no name in /etc/passwd).
 */
export function osUserName(): string {
  try {
    const info = userInfo();
    if (info.username) return info.username;
  } catch {
    // no entry for this uid
  }
  return process.env.USER || process.env.LOGNAME || `uid ${process.getuid?.() ?? '?'}`;
}
