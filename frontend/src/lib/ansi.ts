// A small ANSI → styled spans parser for job logs: SGR colours and attributes (16, 256 and
// 24-bit colours), carriage returns (`\r`, and `ESC[1G` which the SSE stream sends in their
// place) overwriting the line from column 1 the way a terminal draws progress bars, `ESC[K`
// erasing; every other escape sequence is dropped. Styles do not carry from one line to the
// next (as in most CI log viewers), so any line can be drawn alone, which virtualized rendering
// needs.

export interface Style {
  fg?: number | string // 0–15: a palette class; a string: a CSS colour
  bg?: number | string
  bold?: boolean
  dim?: boolean
  italic?: boolean
  underline?: boolean
  inverse?: boolean
}

export interface Span {
  text: string
  style: Style
}

const ESC = '\x1b'
const PLAIN: Style = Object.freeze({}) as Style

type Token = { t: 'text'; text: string; style: Style } | { t: 'cr' } | { t: 'erase'; all: boolean }

/** Colour n of the xterm 256-colour palette: 0–15 stay palette indexes, the rest are CSS colours. */
export function color256(n: number): number | string {
  if (!(n >= 0 && n <= 255)) return 7
  if (n < 16) return n
  if (n >= 232) {
    const v = 8 + (n - 232) * 10
    return hex(v, v, v)
  }
  const i = n - 16
  const lvl = (x: number) => (x === 0 ? 0 : 55 + x * 40)
  return hex(lvl(Math.floor(i / 36)), lvl(Math.floor(i / 6) % 6), lvl(i % 6))
}

function hex(r: number, g: number, b: number): string {
  const h = (x: number) => Math.max(0, Math.min(255, x | 0)).toString(16).padStart(2, '0')
  return '#' + h(r) + h(g) + h(b)
}

/** Applies the parameters of one SGR sequence (`ESC[…m`) to a style; returns a new style. */
export function applySGR(params: number[], style: Style): Style {
  let s: Style = { ...style }
  if (params.length === 0) params = [0]
  for (let i = 0; i < params.length; i++) {
    const p = params[i]
    if (p === 0) s = {}
    else if (p === 1) s.bold = true
    else if (p === 2) s.dim = true
    else if (p === 3) s.italic = true
    else if (p === 4) s.underline = true
    else if (p === 7) s.inverse = true
    else if (p === 22) {
      delete s.bold
      delete s.dim
    } else if (p === 23) delete s.italic
    else if (p === 24) delete s.underline
    else if (p === 27) delete s.inverse
    else if (p >= 30 && p <= 37) s.fg = p - 30
    else if (p === 39) delete s.fg
    else if (p >= 40 && p <= 47) s.bg = p - 40
    else if (p === 49) delete s.bg
    else if (p >= 90 && p <= 97) s.fg = p - 90 + 8
    else if (p >= 100 && p <= 107) s.bg = p - 100 + 8
    else if (p === 38 || p === 48) {
      const key = p === 38 ? 'fg' : 'bg'
      if (params[i + 1] === 5 && i + 2 < params.length) {
        s[key] = color256(params[i + 2])
        i += 2
      } else if (params[i + 1] === 2 && i + 4 < params.length) {
        s[key] = hex(params[i + 2], params[i + 3], params[i + 4])
        i += 4
      }
    }
  }
  return s
}

function tokenize(line: string): { tokens: Token[]; cr: boolean } {
  const tokens: Token[] = []
  let style = PLAIN
  let cr = false
  let text = ''
  const flush = () => {
    if (text) tokens.push({ t: 'text', text, style })
    text = ''
  }
  const n = line.length
  for (let i = 0; i < n; i++) {
    const c = line.charCodeAt(i)
    if (c === 0x1b) {
      const next = line[i + 1]
      if (next === '[') {
        let j = i + 2
        while (j < n) {
          const f = line.charCodeAt(j)
          if (f >= 0x40 && f <= 0x7e) break
          j++
        }
        if (j >= n) {
          i = n
          break
        }
        const final = line[j]
        const raw = line.slice(i + 2, j)
        if (final === 'm') {
          flush()
          const params = raw === '' ? [] : raw.split(/[;:]/).map((x) => (x === '' ? 0 : parseInt(x, 10) || 0))
          style = applySGR(params, style)
        } else if (final === 'G') {
          const col = parseInt(raw || '1', 10) || 1
          if (col <= 1) {
            flush()
            tokens.push({ t: 'cr' })
            cr = true
          }
        } else if (final === 'K') {
          flush()
          tokens.push({ t: 'erase', all: raw === '2' })
          cr = true
        }
        i = j
      } else if (next === ']') {
        // OSC: up to BEL or ST (ESC \).
        let j = i + 2
        while (j < n && line.charCodeAt(j) !== 7 && !(line[j] === ESC && line[j + 1] === '\\')) j++
        i = line[j] === ESC ? j + 1 : j
      } else if (next === '(' || next === ')' || next === '*' || next === '+') {
        i += 2 // a character set designation: ESC ( B
      } else {
        i++ // a two-character escape
      }
    } else if (c === 13) {
      flush()
      tokens.push({ t: 'cr' })
      cr = true
    } else if (c < 32 && c !== 9) {
      // other control characters (backspace, bell, …) are not drawn
    } else {
      text += line[i]
    }
  }
  flush()
  return { tokens, cr }
}

/** Parses one line of log (without its `\n`) into styled spans. */
export function parseAnsi(line: string): Span[] {
  while (line.endsWith('\r')) line = line.slice(0, -1) // CRLF line ends
  if (line.indexOf(ESC) < 0 && line.indexOf('\r') < 0) return line ? [{ text: line, style: PLAIN }] : []
  const { tokens, cr } = tokenize(line)
  if (!cr) return merge(tokens.filter((t): t is Extract<Token, { t: 'text' }> => t.t === 'text').map((t) => ({ text: t.text, style: t.style })))
  // Carriage returns: a cell per character, overwritten from column 1.
  const chars: string[] = []
  const styles: Style[] = []
  let col = 0
  for (const t of tokens) {
    if (t.t === 'cr') col = 0
    else if (t.t === 'erase') {
      if (t.all) {
        chars.length = 0
        styles.length = 0
      } else {
        chars.length = Math.min(chars.length, col)
        styles.length = chars.length
      }
    } else {
      for (const ch of t.text) {
        chars[col] = ch
        styles[col] = t.style
        col++
      }
    }
  }
  const spans: Span[] = []
  for (let i = 0; i < chars.length; i++) {
    const ch = chars[i] ?? ' '
    const st = styles[i] ?? PLAIN
    const last = spans[spans.length - 1]
    if (last && last.style === st) last.text += ch
    else spans.push({ text: ch, style: st })
  }
  return spans
}

function merge(spans: Span[]): Span[] {
  const out: Span[] = []
  for (const s of spans) {
    const last = out[out.length - 1]
    if (last && last.style === s.style) last.text += s.text
    else out.push({ ...s })
  }
  return out
}

/** The visible text of a line: what search matches against. */
export function plainText(line: string): string {
  return parseAnsi(line)
    .map((s) => s.text)
    .join('')
}

/** CSS class names and inline style of a span. */
export function spanProps(style: Style): { className?: string; style?: Record<string, string> } {
  let { fg, bg } = style
  if (style.inverse) [fg, bg] = [bg ?? 'var(--log-bg)', fg ?? 'var(--log-fg)']
  const cls: string[] = []
  const css: Record<string, string> = {}
  if (typeof fg === 'number') cls.push('af' + fg)
  else if (fg) css.color = fg
  if (typeof bg === 'number') cls.push('ab' + bg)
  else if (bg) css.backgroundColor = bg
  if (style.bold) cls.push('a-b')
  if (style.dim) cls.push('a-d')
  if (style.italic) cls.push('a-i')
  if (style.underline) cls.push('a-u')
  return { className: cls.length ? cls.join(' ') : undefined, style: Object.keys(css).length ? css : undefined }
}

/** Splits spans so that the ranges where the (lower-cased) query occurs are marked. */
export function markMatches(spans: Span[], query: string): { text: string; style: Style; mark: boolean }[] {
  const out: { text: string; style: Style; mark: boolean }[] = []
  if (!query) return spans.map((s) => ({ ...s, mark: false }))
  const full = spans.map((s) => s.text).join('').toLowerCase()
  const q = query.toLowerCase()
  const marked = new Uint8Array(full.length)
  for (let at = full.indexOf(q); at >= 0; at = full.indexOf(q, at + Math.max(1, q.length))) marked.fill(1, at, at + q.length)
  let pos = 0
  for (const s of spans) {
    let start = 0
    for (let i = 1; i <= s.text.length; i++) {
      if (i === s.text.length || marked[pos + i] !== marked[pos + start]) {
        out.push({ text: s.text.slice(start, i), style: s.style, mark: marked[pos + start] === 1 })
        start = i
      }
    }
    pos += s.text.length
  }
  return out
}
