// Formatting for people.
export function shortSha(sha: string): string {
  return sha ? sha.slice(0, 8) : ''
}

export function duration(ms: number): string {
  if (!(ms >= 0)) return '—'
  const s = Math.round(ms / 1000)
  if (s < 60) return `${s}s`
  const m = Math.floor(s / 60)
  if (m < 60) return `${m}m ${s % 60}s`
  const h = Math.floor(m / 60)
  return `${h}h ${m % 60}m`
}

/** The running or final duration between two timestamps (to now while unfinished). */
export function span(start: string | null, end: string | null, now = Date.now()): string {
  if (!start) return '—'
  return duration((end ? Date.parse(end) : now) - Date.parse(start))
}

export function ago(ts: string | null, now = Date.now()): string {
  if (!ts) return '—'
  const s = Math.round((now - Date.parse(ts)) / 1000)
  if (s < 5) return 'just now'
  if (s < 60) return `${s}s ago`
  if (s < 3600) return `${Math.floor(s / 60)}m ago`
  if (s < 86400) return `${Math.floor(s / 3600)}h ago`
  return new Date(ts).toLocaleDateString()
}

export function dateTime(ts: string | null): string {
  return ts ? new Date(ts).toLocaleString() : '—'
}

export function bytes(n: number): string {
  if (!(n >= 0)) return '—'
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB']
  let i = 0
  while (n >= 1024 && i < u.length - 1) {
    n /= 1024
    i++
  }
  return `${i === 0 ? n : n.toFixed(1)} ${u[i]}`
}

export function coreHours(coreSeconds: number): string {
  if (coreSeconds > 0 && coreSeconds < 36) return `${coreSeconds} core-s`
  const h = coreSeconds / 3600
  return `${h < 10 ? h.toFixed(2) : h.toFixed(1)} core-h`
}

/** A money string (already a decimal) with its currency, trailing zeros beyond 2 places trimmed. */
export function money(amount: string | null | undefined, currency = ''): string {
  if (amount == null || amount === '') return '—'
  let s = amount
  const dot = s.indexOf('.')
  if (dot >= 0) {
    s = s.replace(/0+$/, '')
    const decimals = s.length - dot - 1
    if (decimals < 2) s = s.padEnd(dot + 3, '0')
  }
  return currency ? `${s} ${currency}` : s
}

export function branchOf(b: { branch: string; tag?: string }): string {
  return b.tag ? `tag ${b.tag}` : b.branch
}
