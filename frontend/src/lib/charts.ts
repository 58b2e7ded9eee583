// Shapes billing usage rows (date × bucket × runner class × repo, core-seconds) into chart
// series: core-hours per day, one series per runner class or per repo, every day of the range
// present. Builds and workspaces are billed in buckets of their own and charted apart.
import type { Usage } from './types'

export type Bucket = Usage['bucket']

/** The buckets in the order the page shows them, with their names for people. */
export const BUCKETS: { bucket: Bucket; label: string }[] = [
  { bucket: 'build', label: 'Builds' },
  { bucket: 'workspace', label: 'Workspaces' },
]

export interface BucketTotal {
  pipelines: number
  core_seconds: number
  quota_core_seconds: number // of core_seconds, what the bucket's free quota paid
}

/** Adds up the rows of each bucket (every bucket present, zero when it has no rows). */
export function bucketTotals(rows: Usage[]): Record<Bucket, BucketTotal> {
  const out = {} as Record<Bucket, BucketTotal>
  for (const { bucket } of BUCKETS) out[bucket] = { pipelines: 0, core_seconds: 0, quota_core_seconds: 0 }
  for (const r of rows) {
    const t = (out[r.bucket] ??= { pipelines: 0, core_seconds: 0, quota_core_seconds: 0 })
    t.pipelines += r.pipelines
    t.core_seconds += r.core_seconds
    t.quota_core_seconds += r.quota_core_seconds
  }
  return out
}

export interface Series {
  key: string
  total: number // core-hours
  values: number[] // core-hours per day, aligned with days
}

export interface ChartData {
  days: string[]
  series: Series[]
  max: number // the largest day's stacked total
}

/** Every date from from to to inclusive, as YYYY-MM-DD (UTC calendar arithmetic). */
export function dayRange(from: string, to: string): string[] {
  const out: string[] = []
  const d = new Date(from + 'T00:00:00Z')
  const end = new Date(to + 'T00:00:00Z')
  if (isNaN(d.getTime()) || isNaN(end.getTime())) return out
  while (d <= end && out.length < 400) {
    out.push(d.toISOString().slice(0, 10))
    d.setUTCDate(d.getUTCDate() + 1)
  }
  return out
}

export const OTHER = 'other'

/**
 * Sums usage into series by runner class or repo. The biggest maxSeries-1 keys keep their own
 * series (ordered by total, largest first); the rest are added into "other".
 */
export function shapeUsage(rows: Usage[], by: 'runner_class' | 'repo', from: string, to: string, maxSeries = 6): ChartData {
  const days = dayRange(from, to)
  const index = new Map(days.map((d, i) => [d, i]))
  const sums = new Map<string, number[]>()
  for (const r of rows) {
    const i = index.get(r.date)
    if (i === undefined) continue
    const key = by === 'repo' ? r.repo || `deleted repo #${r.repo_id}` : r.runner_class
    let v = sums.get(key)
    if (!v) sums.set(key, (v = new Array(days.length).fill(0)))
    v[i] += r.core_seconds / 3600
  }
  let series: Series[] = [...sums].map(([key, values]) => ({ key, values, total: values.reduce((a, b) => a + b, 0) }))
  series.sort((a, b) => b.total - a.total || a.key.localeCompare(b.key))
  if (series.length > maxSeries) {
    const keep = series.slice(0, maxSeries - 1)
    const rest = series.slice(maxSeries - 1)
    const values = days.map((_, i) => rest.reduce((a, s) => a + s.values[i], 0))
    keep.push({ key: OTHER, values, total: values.reduce((a, b) => a + b, 0) })
    series = keep
  }
  const max = days.reduce((m, _, i) => Math.max(m, series.reduce((a, s) => a + s.values[i], 0)), 0)
  return { days, series, max }
}

/** Round axis ticks from 0 to at least max: 0, step, 2·step, … with step 1, 2 or 5 × 10^k. */
export function niceTicks(max: number, count = 4): number[] {
  if (!(max > 0)) return [0, 1]
  const raw = max / count
  const mag = Math.pow(10, Math.floor(Math.log10(raw)))
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? 10 * mag
  const ticks: number[] = []
  for (let v = 0; v < max + step * 0.999; v += step) ticks.push(Number(v.toPrecision(12)))
  return ticks
}
