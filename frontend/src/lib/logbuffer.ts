// LogBuffer keeps a job's log as lines while it streams in: appended text may end in the middle
// of a line, which the next chunk continues.
export class LogBuffer {
  lines: string[] = ['']
  /** Bytes received (the log offset), when the caller tracks it. */
  offset = 0

  append(text: string): void {
    if (!text) return
    const parts = text.split('\n')
    this.lines[this.lines.length - 1] += parts[0]
    for (let i = 1; i < parts.length; i++) this.lines.push(parts[i])
  }

  /** Lines to show: a trailing newline does not open an empty last line. */
  get count(): number {
    const n = this.lines.length
    return this.lines[n - 1] === '' ? n - 1 : n
  }

  /** 0-based indexes of the lines whose visible text contains query (ignoring case). */
  search(query: string, plain: (line: string) => string): number[] {
    const q = query.toLowerCase()
    if (!q) return []
    const out: number[] = []
    const n = this.count
    for (let i = 0; i < n; i++) {
      const line = this.lines[i]
      // Cheap pre-check on the raw line before stripping escapes.
      if (line.toLowerCase().indexOf(q) < 0 && line.indexOf('\x1b') < 0 && line.indexOf('\r') < 0) continue
      if (plain(line).toLowerCase().indexOf(q) >= 0) out.push(i)
    }
    return out
  }
}
