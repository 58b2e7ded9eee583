import type { S } from './types'

export type Diagnostic = S['Diagnostic']

/** The place a diagnostic points at, as the linter prints it: FILE:LINE:COL. */
export function place(d: Diagnostic): string {
  let s = d.file
  if (d.line > 0) s += `:${d.line}`
  if (d.line > 0 && d.column > 0) s += `:${d.column}`
  return s
}

/**
 * The excerpt as `nimbus lint` prints it: numbered lines, and a caret under the column of the
 * offending line.
 */
export function excerptText(d: Diagnostic): string {
  const ex = d.excerpt
  if (!ex) return ''
  const width = String(ex.first_line + ex.lines.length - 1).length
  const out: string[] = []
  ex.lines.forEach((l, i) => {
    const n = ex.first_line + i
    out.push(` ${String(n).padStart(width)} | ${l}`)
    if (n === d.line && d.column > 0) out.push(` ${' '.repeat(width)} | ${' '.repeat(d.column - 1)}^`)
  })
  return out.join('\n')
}

/** Errors first, then warnings, then advice; each group in file order as the server sent it. */
export function bySeverity(ds: Diagnostic[]): Diagnostic[] {
  const rank = { error: 0, warning: 1, info: 2 } as const
  return [...ds].sort((a, b) => rank[a.severity] - rank[b.severity])
}
