// Cloud workspaces (backend/workspace/README.md) for people: the types by name, states, the
// countdowns, the page's path and the terminal WebSocket's URL. The calls are
// `endpoints.workspaces` like every other API call.
//
// The types are aliases of the schemas generated from backend/server/openapi.yaml into
// api-schema.ts (`npm run gen:api`), as types.ts does, so they cannot drift from the document.
import type { components } from './api-schema'
import { BASE, seg } from './api'
import { dateTime, type Zone } from './format'

type S = components['schemas']

/** queued → starting → ready → stopping → stopped | failed */
export type WorkspaceState = S['Workspace']['state']

/**
 * How the IDE is reached: `code-server` (in the image), `sidecar` (the operator's IDE container),
 * `launch` (the vscode service's launch command), `none` (then `reason` says why; the terminal is
 * the way in).
 */
export type IdeKind = S['IDE']['kind']

/** `url` opens the IDE in a browser (a 303 to its preview origin with a one-time login); null or
 * '' when there is none. */
export type WorkspaceIDE = S['IDE']

/** Work an earlier workspace of the branch saved when it stopped. */
export type SavedWork = S['SavedWork']

/**
 * One workspace (WorkspaceJSON); its id is its pipeline's id. The server always sends
 * `saved_work` as an array (newest first); it is typed nullable here only because the pages read
 * it defensively (`?? []`) and their fixtures rely on that.
 */
export type Workspace = Omit<S['Workspace'], 'saved_work'> & { saved_work: SavedWork[] | null }

export type RestoreResult = S['WorkspaceRestoreResult']

/** States in which the workspace still runs (or is about to). */
export const ACTIVE_STATES: ReadonlySet<WorkspaceState> = new Set(['queued', 'starting', 'ready', 'stopping'])
export const isEnded = (w: Pick<Workspace, 'state'>) => w.state === 'stopped' || w.state === 'failed'

/** The dashboard's page of one workspace. */
export const workspacePath = (w: { org: string; repo: string; id: number }) => `/${seg(w.org)}/${seg(w.repo)}/workspaces/${w.id}`

/** The terminal WebSocket's subprotocol. */
export const TERMINAL_PROTOCOL = 'nimbus-terminal.v1'

/**
 * The terminal WebSocket's URL on this page's origin (ws: or wss: as the page is http: or
 * https:); the browser sends the session cookie with it. `session` reattaches to a shell.
 */
export function terminalUrl(
  id: number | string,
  q: { session?: string; cols?: number; rows?: number } = {},
  loc: { protocol: string; host: string } = window.location,
): string {
  const params = new URLSearchParams()
  if (q.session) params.set('session', q.session)
  if (q.cols) params.set('cols', String(q.cols))
  if (q.rows) params.set('rows', String(q.rows))
  const s = params.toString()
  return `${loc.protocol === 'https:' ? 'wss:' : 'ws:'}//${loc.host}${BASE}/workspaces/${seg(String(id))}/terminal${s ? '?' + s : ''}`
}

/** A countdown for people: 9m 05s, 1h 02m, 42s. */
export function countdown(ms: number): string {
  const s = Math.max(0, Math.ceil(ms / 1000))
  const h = Math.floor(s / 3600)
  const m = Math.floor((s % 3600) / 60)
  const sec = s % 60
  const two = (n: number) => String(n).padStart(2, '0')
  if (h > 0) return `${h}h ${two(m)}m`
  if (m > 0) return `${m}m ${two(sec)}s`
  return `${sec}s`
}

/** What the idle column says: the countdown, "connected", or why there is none. */
export function idleText(w: Workspace, now: number): { text: string; kind: 'countdown' | 'connected' | 'expired' | 'none' } {
  if (w.state !== 'ready') return { text: '—', kind: 'none' }
  if (w.idle_deadline) {
    const left = Date.parse(w.idle_deadline) - now
    if (left <= 0) return { text: 'idle: stopping', kind: 'expired' }
    return { text: `stops in ${countdown(left)} if idle`, kind: 'countdown' }
  }
  if (w.connections != null && w.connections > 0) return { text: w.connections === 1 ? 'connected' : `connected (${w.connections})`, kind: 'connected' }
  return { text: w.connections == null ? 'agent unreachable' : '—', kind: 'none' }
}

/** The lifetime cap: when, and how long until then while the workspace runs. */
export function lifetimeText(w: Workspace, now: number, z: Zone = {}): string {
  if (!w.lifetime_deadline) return '—'
  // With its zone, as every time on the dashboard (format.dateTime): a bare local time read
  // as the server's.
  const at = dateTime(w.lifetime_deadline, z)
  if (isEnded(w)) return at
  const left = Date.parse(w.lifetime_deadline) - now
  return left > 0 ? `${at} (in ${countdown(left)})` : `${at} (reached)`
}
