// The dashboard's only way to the server: JSON over /api/v1 with the session cookie, and the
// session's CSRF token on every write.
import type { Page } from './types'

let csrfToken = ''

export function setCsrf(token: string | undefined): void {
  csrfToken = token ?? ''
}

export class ApiError extends Error {
  status: number
  code: string
  field?: string
  constructor(status: number, code: string, message: string, field?: string) {
    super(message)
    this.status = status
    this.code = code
    this.field = field
  }
}

export const BASE = '/api/v1'

async function request<T>(method: string, path: string, body?: unknown, extra?: Record<string, string>): Promise<T> {
  const headers: Record<string, string> = { Accept: 'application/json', ...extra }
  if (body !== undefined) headers['Content-Type'] = 'application/json'
  if (method !== 'GET' && method !== 'HEAD' && csrfToken) headers['X-CSRF-Token'] = csrfToken
  let res: Response
  try {
    res = await fetch(BASE + path, {
      method,
      headers,
      credentials: 'same-origin',
      body: body === undefined ? undefined : JSON.stringify(body),
    })
  } catch (e) {
    throw new ApiError(0, 'network', `The server could not be reached (${e instanceof Error ? e.message : String(e)}).`)
  }
  if (res.status === 204) return undefined as T
  const text = await res.text()
  let data: unknown = undefined
  try {
    data = text ? JSON.parse(text) : undefined
  } catch {
    data = undefined
  }
  if (!res.ok) {
    const err = (data as { error?: { code?: string; message?: string; details?: { field?: string } } } | undefined)?.error
    throw new ApiError(res.status, err?.code ?? 'http_' + res.status, err?.message ?? `The server answered ${res.status}.`, err?.details?.field)
  }
  return data as T
}

export const api = {
  get: <T>(path: string) => request<T>('GET', path),
  /** extra headers: an Idempotency-Key, for instance. */
  post: <T>(path: string, body?: unknown, extra?: Record<string, string>) => request<T>('POST', path, body, extra),
  put: <T>(path: string, body?: unknown) => request<T>('PUT', path, body),
  patch: <T>(path: string, body?: unknown) => request<T>('PATCH', path, body),
  del: <T>(path: string) => request<T>('DELETE', path),
}

/**
 * Every item of a paginated list, following next_cursor (at most maxPages pages of `limit`), from
 * the start or from the cursor `from` (a list whose first page came in another answer). A null
 * limit sends none: for a list the server answers whole today but may page later.
 */
export async function listAll<T>(path: string, maxPages = 20, from?: string, limit: number | null = 100): Promise<T[]> {
  const out: T[] = []
  let cursor = from
  for (let i = 0; i < maxPages; i++) {
    const q = [limit === null ? '' : `limit=${limit}`, cursor ? `cursor=${encodeURIComponent(cursor)}` : ''].filter(Boolean).join('&')
    const sep = path.includes('?') ? '&' : '?'
    const page = await api.get<Page<T>>(q ? `${path}${sep}${q}` : path)
    out.push(...page.items)
    if (!page.next_cursor) break
    cursor = page.next_cursor
  }
  return out
}

/** Encodes one path segment. */
export const seg = encodeURIComponent

/** The dashboard says "team" where the API says "org". */
export const inTeamWords = (s: string) => s.replace(/\borgs?\b/g, (w) => (w === 'orgs' ? 'teams' : 'team'))

export function errorMessage(e: unknown): string {
  if (e instanceof ApiError) return inTeamWords(e.message)
  if (e instanceof Error) return e.message
  return String(e)
}
