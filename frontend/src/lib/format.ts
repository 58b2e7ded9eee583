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
  return day(ts)
}

// The one date format of every page: the locale's medium date.
const DATE: Intl.DateTimeFormatOptions = { year: 'numeric', month: 'short', day: 'numeric' }

/** Where and in which zone times are shown; the defaults are the browser's. Tests pin both. */
export type Zone = { locale?: string; timeZone?: string }

/**
 * A zone name Intl takes: a server's "UTC+8" (Go's name of a fixed offset) becomes
 * "Etc/GMT-8" (tzdata's, sign inverted); a name Intl still refuses is dropped for the
 * browser's own zone rather than failing the whole page with a RangeError.
 */
export function intlZone(tz?: string): string | undefined {
  if (!tz) return undefined
  const fixed = /^(?:UTC|GMT)([+-])(\d{1,2})$/.exec(tz)
  const name = fixed ? (Number(fixed[2]) === 0 ? 'UTC' : `Etc/GMT${fixed[1] === '+' ? '-' : '+'}${Number(fixed[2])}`) : tz
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: name })
    return name
  } catch {
    return undefined
  }
}

/**
 * A moment with its time zone, in the locale's one date format: "Dec 3, 2026, 12:52 PM UTC" in
 * en-US, "3. Dez. 2026, 12:52 UTC" in de-DE.
 */
export function dateTime(ts: string | null, z: Zone = {}): string {
  if (!ts) return '—'
  return new Intl.DateTimeFormat(z.locale, { ...DATE, hour: 'numeric', minute: '2-digit', timeZone: intlZone(z.timeZone), timeZoneName: 'short' }).format(new Date(ts))
}

/** The time of day of a moment, to the second, 24-hour ("16:30:05"): the log's line times. */
export function clockTime(ms: number, z: Zone = {}): string {
  return new Intl.DateTimeFormat(z.locale ?? 'en-GB', { hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23', timeZone: intlZone(z.timeZone) }).format(new Date(ms))
}

/** The short name of the zone times are shown in ("UTC", "GMT+8"). */
export function zoneName(z: Zone = {}, at = Date.now()): string {
  const part = new Intl.DateTimeFormat(z.locale ?? 'en-US', { timeZone: intlZone(z.timeZone), timeZoneName: 'short' }).formatToParts(new Date(at)).find((p) => p.type === 'timeZoneName')
  return part?.value ?? ''
}

/** The date of a moment in the locale's date format ("Dec 3, 2026"). */
export function day(ts: string, z: Zone = {}): string {
  return new Intl.DateTimeFormat(z.locale, { ...DATE, timeZone: intlZone(z.timeZone) }).format(new Date(ts))
}

/**
 * A calendar date the server already placed in its billing time zone (YYYY-MM-DD), in the
 * locale's date format: formatted as that date, never shifted into the browser's zone.
 */
export function calendarDay(date: string, locale?: string): string {
  const [y, m, d] = date.split('-').map(Number)
  if (!y || !m || !d) return date
  return new Intl.DateTimeFormat(locale, { ...DATE, timeZone: 'UTC' }).format(new Date(Date.UTC(y, m - 1, d)))
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

/**
 * Usage is shown in one unit everywhere: core-hours with two decimals. The exact core-seconds
 * go in a tooltip (coreSeconds).
 */
export function coreHours(coreSeconds: number): string {
  if (!Number.isFinite(coreSeconds)) return '—'
  return `${(coreSeconds / 3600).toFixed(2)} core-hours`
}

/** The exact figure behind coreHours, for a title attribute. */
export function coreSeconds(n: number): string {
  return `${Math.round(n)} core-seconds`
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
