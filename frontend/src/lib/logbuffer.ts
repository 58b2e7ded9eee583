// LogBuffer keeps a job's log as lines while it streams in: appended text may end in the middle
// of a line, which the next chunk continues.
export class LogBuffer {
  lines: string[] = ['']
  /** starts[i] is the byte offset in the log where line i begins (for its timestamp). */
  starts: number[] = [0]
  /** Bytes received (the log offset), when the caller tracks it. */
  offset = 0
  /** Bytes appended so far, counted as UTF-8. */
  private bytes = 0

  append(text: string): void {
    if (!text) return
    const parts = text.split('\n')
    this.lines[this.lines.length - 1] += parts[0]
    this.bytes += utf8Length(parts[0])
    for (let i = 1; i < parts.length; i++) {
      this.bytes += 1 // the newline
      this.starts.push(this.bytes)
      this.lines.push(parts[i])
      this.bytes += utf8Length(parts[i])
    }
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

/** The UTF-8 length of s, without encoding it. */
export function utf8Length(s: string): number {
  let n = 0
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c < 0x80) n += 1
    else if (c < 0x800) n += 2
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      n += 4 // a surrogate pair is one 4-byte code point
      i++
    } else n += 3
  }
  return n
}

/** A piece of the log: where it starts and when the server received it (GET …/log/times). */
export type Mark = { offset: number; at: number }

/**
 * The time of the line that starts at byte offset: that of the last piece starting at or
 * before it (marks sorted by offset); undefined before the first mark.
 */
export function timeAt(marks: Mark[], offset: number): number | undefined {
  let lo = 0
  let hi = marks.length - 1
  let found = -1
  while (lo <= hi) {
    const mid = (lo + hi) >> 1
    if (marks[mid].offset <= offset) {
      found = mid
      lo = mid + 1
    } else hi = mid - 1
  }
  return found < 0 ? undefined : marks[found].at
}
