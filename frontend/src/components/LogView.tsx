import { memo, useCallback, useEffect, useLayoutEffect, useMemo, useRef, useState } from 'react'
import { flushSync } from 'react-dom'
import { markMatches, parseAnsi, plainText, spanProps } from '../lib/ansi'
import { endpoints } from '../lib/endpoints'
import { LogBuffer, timeAt, type Mark } from '../lib/logbuffer'
import { clockTime, zoneName } from '../lib/format'
import { RowHeights, atBottom, contentTop, rowTop, rowsOf, scrollTopAt, scrollTopFor, totalHeight, visibleRange, type Viewport } from '../lib/virtual'

export const ROW_HEIGHT = 20

export type LogState = 'loading' | 'live' | 'done' | 'error'

/**
 * Loads a job's log: what exists now through GET /jobs/{id}/log (read as a stream, so a big log
 * shows while it downloads), then, while the job runs, the rest through the SSE stream from that
 * byte offset. The buffer is mutated in place; version changes at most once a frame.
 */
export function useJobLog(jobId: number) {
  const buf = useRef(new LogBuffer())
  const [version, setVersion] = useState(0)
  const [state, setState] = useState<LogState>('loading')
  const [error, setError] = useState('')
  useEffect(() => {
    const b = new LogBuffer()
    buf.current = b
    setVersion((v) => v + 1)
    setState('loading')
    setError('')
    let stopped = false
    let es: EventSource | null = null
    let raf = 0
    const bump = () => {
      if (!raf)
        raf = requestAnimationFrame(() => {
          raf = 0
          if (!stopped) setVersion((v) => v + 1)
        })
    }
    const ctrl = new AbortController()
    ;(async () => {
      try {
        const res = await fetch(endpoints.jobs.logUrl(jobId), { signal: ctrl.signal, credentials: 'same-origin' })
        if (!res.ok) {
          let msg = `The server answered ${res.status}.`
          try {
            msg = (await res.json()).error.message ?? msg
          } catch {
            /* keep the status */
          }
          throw new Error(msg)
        }
        const complete = res.headers.get('X-Log-Complete') === 'true'
        const dec = new TextDecoder()
        let bytes = 0
        if (res.body) {
          const reader = res.body.getReader()
          for (;;) {
            const { done, value } = await reader.read()
            if (done) break
            bytes += value.length
            b.append(dec.decode(value, { stream: true }))
            bump()
          }
        } else {
          const ab = new Uint8Array(await res.arrayBuffer())
          bytes = ab.length
          b.append(dec.decode(ab, { stream: true }))
        }
        b.append(dec.decode())
        b.offset = bytes
        bump()
        if (stopped) return
        if (complete) {
          setState('done')
          return
        }
        setState('live')
        es = new EventSource(endpoints.jobs.logStreamUrl(jobId, bytes))
        es.onmessage = (ev) => {
          b.append(ev.data)
          const off = Number(ev.lastEventId)
          if (off > 0) b.offset = off
          bump()
        }
        es.addEventListener('end', () => {
          es?.close()
          if (!stopped) setState('done')
        })
        es.onerror = () => {
          // EventSource reconnects by itself (with Last-Event-ID) unless the server refused it.
          if (es?.readyState === EventSource.CLOSED && !stopped) {
            setError('The live log stream closed; reload to continue.')
            setState('error')
          }
        }
      } catch (e) {
        if (stopped) return
        setError(e instanceof Error ? e.message : String(e))
        setState('error')
      }
    })()
    return () => {
      stopped = true
      ctrl.abort()
      es?.close()
      if (raf) cancelAnimationFrame(raf)
    }
  }, [jobId])
  return { buffer: buf.current, version, state, error }
}

/**
 * The arrival times of the log's pieces while timestamps are on: every page once, then, while
 * the job runs, what arrived since, every 2 seconds.
 */
function useLogTimes(jobId: number, on: boolean, state: LogState): Mark[] {
  const [marks, setMarks] = useState<Mark[]>([])
  // What is known already, so a new effect (the log going from live to done, timestamps off and
  // on) asks only for what came after it.
  const known = useRef<{ job: number; marks: Mark[] }>({ job: jobId, marks: [] })
  useEffect(() => {
    if (!on) return
    if (known.current.job !== jobId) known.current = { job: jobId, marks: [] }
    const got = known.current.marks
    let stopped = false
    let timer = 0
    const load = async () => {
      try {
        for (;;) {
          const after = got.length ? got[got.length - 1].offset : -1
          const page = await endpoints.jobs.logTimes(jobId, after)
          if (stopped) return
          for (const m of page.marks) got.push({ offset: m.offset, at: Date.parse(m.received_at) })
          if (page.next === undefined) break
        }
        if (!stopped) setMarks([...got])
      } catch {
        /* times are an extra: the log shows without them */
      }
      if (!stopped && state === 'live') timer = window.setTimeout(load, 2000)
    }
    load()
    return () => {
      stopped = true
      clearTimeout(timer)
    }
  }, [jobId, on, state])
  return marks
}

const Line = memo(function Line({ text, n, top, query, selected, match, time }: { text: string; n: number; top: number; query: string; selected: boolean; match: boolean; time?: string }) {
  const spans = parseAnsi(text)
  const parts = query && match ? markMatches(spans, query) : null
  return (
    <div className={`ln${selected ? ' sel' : ''}${match ? ' hit' : ''}`} style={{ top }} data-line={n}>
      <a className="num" href={`#L${n}`} id={`L${n}`} aria-label={`Line ${n}`} tabIndex={-1}>
        {n}
      </a>
      {time !== undefined && <span className="ts">{time}</span>}
      <span className="txt">
        {parts
          ? parts.map((p, i) => {
              const sp = spanProps(p.style)
              return p.mark ? (
                <mark key={i} {...sp}>
                  {p.text}
                </mark>
              ) : (
                <span key={i} {...sp}>
                  {p.text}
                </span>
              )
            })
          : spans.map((s, i) => (
              <span key={i} {...spanProps(s.style)}>
                {s.text}
              </span>
            ))}
      </span>
    </div>
  )
})

function lineFromHash(hash: string): number | null {
  const m = /^#L(\d+)$/.exec(hash)
  return m ? Number(m[1]) : null
}

/** A wrapped line's height before it is drawn: its visible characters over the columns a row holds. */
export function estimateHeight(line: string, cols: number): number {
  if (cols <= 0 || line.length <= cols) return ROW_HEIGHT
  return ROW_HEIGHT * Math.max(1, Math.ceil(plainText(line).length / cols))
}

/**
 * The heights of a buffer's wrapped lines at one width: estimated from their length, then, once
 * drawn, as measured. A new width starts over (every line wraps anew).
 */
class WrappedRows {
  readonly buffer: LogBuffer
  readonly cols: number
  rows: RowHeights
  private tailLength = 0
  constructor(buffer: LogBuffer, cols: number, count: number) {
    this.buffer = buffer
    this.cols = cols
    const hs = new Float64Array(count)
    for (let i = 0; i < count; i++) hs[i] = estimateHeight(buffer.lines[i], cols)
    this.rows = RowHeights.of(hs)
    if (count > 0) this.tailLength = buffer.lines[count - 1].length
  }

  /** Catches up with the buffer's new lines. */
  sync(count: number): void {
    const r = this.rows
    const lines = this.buffer.lines
    // A chunk that ended mid-line left the last row shorter than the line is now.
    if (r.count > 0 && lines[r.count - 1].length !== this.tailLength) r.set(r.count - 1, estimateHeight(lines[r.count - 1], this.cols))
    for (let i = r.count; i < count; i++) r.push(estimateHeight(lines[i], this.cols))
    if (r.count > 0) this.tailLength = lines[r.count - 1].length
  }
}

/** Where the view stood: row line's top was screen px below the viewport's top. */
type Anchor = { model: unknown; line: number; screen: number }

export interface LogLinesProps {
  buffer: LogBuffer
  version: number
  follow: boolean
  onFollowChange: (f: boolean) => void
  query: string
  matches: number[]
  current: number // index into matches, -1 none
  height?: number // viewport height when it cannot be measured (tests)
  /** When set, each line shows this time (timestamps on). */
  timeOf?: (line: number) => string
  /** Long lines wrap: rows take the height their text needs. */
  wrap?: boolean
}

/** The virtualized lines: only those in view (and a few around) are in the DOM. */
export function LogLines({ buffer, version, follow, onFollowChange, query, matches, current, height = 600, timeOf, wrap = false }: LogLinesProps) {
  const ref = useRef<HTMLDivElement>(null)
  const probe = useRef<HTMLSpanElement>(null)
  const [scrollTop, setScrollTop] = useState(0)
  const [vh, setVh] = useState(height)
  const [width, setWidth] = useState(0)
  const [charWidth, setCharWidth] = useState(0)
  // Bumped when drawn rows turned out taller or shorter than laid out.
  const [measured, setMeasured] = useState(0)
  const [selected, setSelected] = useState<number | null>(() => lineFromHash(location.hash))
  const pendingJump = useRef<number | null>(selected)
  // Bumped when the URL's #L… changes, so the jump happens without waiting for new lines.
  const [hashJumps, setHashJumps] = useState(0)
  // The row the user went to (a linked line, a search match): it stays put while the rows
  // around it are measured, until the user scrolls.
  const focus = useRef<number | null>(null)
  const anchor = useRef<Anchor | null>(null)
  // The scroll position this component set last, to tell the user's scrolling from its own.
  const own = useRef(-1)
  const count = buffer.count
  const digits = String(Math.max(count, 1)).length
  // The characters a wrapped row holds: the width less the number, the timestamp and the padding.
  const cols = wrap && width > 0 && charWidth > 0 ? Math.max(1, Math.floor(width / charWidth) - (digits + 1) - 2 - (timeOf ? 9 : 0)) : 0
  const wrapped = useRef<WrappedRows | null>(null)
  let rows: RowHeights | undefined
  if (wrap) {
    if (!wrapped.current || wrapped.current.buffer !== buffer || wrapped.current.cols !== cols) wrapped.current = new WrappedRows(buffer, cols, count)
    wrapped.current.sync(count)
    rows = wrapped.current.rows
  } else wrapped.current = null
  const v: Viewport = { count, rowHeight: ROW_HEIGHT, height: vh, rows }
  // What the rows' layout is: when it changes under the view, the view keeps its place.
  const model = rows ? `${measured}` : 'fixed'
  const modelKey = useMemo(() => ({ rows, model }), [rows, model])
  const matchSet = useMemo(() => new Set(matches), [matches])
  useLayoutEffect(() => {
    const el = ref.current
    if (!el) return
    const measure = () => {
      setVh(el.clientHeight || height)
      setWidth(el.clientWidth)
      if (probe.current) setCharWidth(probe.current.getBoundingClientRect().width / 10)
    }
    measure()
    if (typeof ResizeObserver === 'undefined') return
    // Rendered before the browser paints the new size: rows laid out for the old width would
    // overlap for a frame.
    const ro = new ResizeObserver(() => flushSync(measure))
    ro.observe(el)
    // The probe resizes when the log's font arrives.
    if (probe.current) ro.observe(probe.current)
    return () => ro.disconnect()
  }, [height, wrap])
  const scrollTo = useCallback((top: number) => {
    const el = ref.current
    if (!el) return
    el.scrollTop = top
    own.current = el.scrollTop
    setScrollTop(el.scrollTop)
  }, [])
  // The layout changed (lines measured, wrapping turned on or off, a new width): the row that
  // was at the top, or the one the user went to, stays where it was on screen.
  useLayoutEffect(() => {
    const a = anchor.current
    if (!a || a.model === modelKey || follow || pendingJump.current !== null || a.line >= count) return
    scrollTo(scrollTopAt(v, rowsOf(v).offset(a.line) - a.screen))
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [modelKey])
  // New lines: follow the end, or jump to the linked line once it exists.
  useLayoutEffect(() => {
    if (pendingJump.current !== null && pendingJump.current <= count) {
      focus.current = pendingJump.current - 1
      scrollTo(scrollTopFor(v, pendingJump.current - 1))
      pendingJump.current = null
      onFollowChange(false)
      return
    }
    if (follow) scrollTo(totalHeight(v))
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [version, follow, count, vh, modelKey, hashJumps])
  useEffect(() => {
    const onHash = () => {
      const n = lineFromHash(location.hash)
      setSelected(n)
      pendingJump.current = n
      setHashJumps((j) => j + 1)
    }
    window.addEventListener('hashchange', onHash)
    return () => window.removeEventListener('hashchange', onHash)
  }, [])
  useEffect(() => {
    if (current >= 0 && matches[current] !== undefined) {
      onFollowChange(false)
      focus.current = matches[current]
      scrollTo(scrollTopFor(v, matches[current]))
    }
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [current, matches])
  // After every render: measure the drawn rows (wrapped, they take the height their text needs)
  // and note where the view stands, for the next change of layout.
  useLayoutEffect(() => {
    const el = ref.current
    if (!el || count === 0) return
    const y = contentTop(v, el.scrollTop)
    const r = rowsOf(v)
    const line = focus.current !== null && focus.current < count ? focus.current : r.indexAt(y)
    anchor.current = { model: modelKey, line, screen: r.offset(line) - y }
    if (!rows) return
    let changed = false
    for (const node of el.querySelectorAll<HTMLElement>('.ln')) {
      const i = Number(node.dataset.line) - 1
      const h = node.offsetHeight
      // jsdom lays nothing out: 0 is no measurement.
      if (h > 0 && i < rows.count && rows.set(i, h) !== 0) changed = true
    }
    if (changed) setMeasured((m) => m + 1)
  })
  const onScroll = () => {
    const el = ref.current
    if (!el) return
    if (Math.abs(el.scrollTop - own.current) > 1) focus.current = null
    setScrollTop(el.scrollTop)
    const bottom = atBottom(v, el.scrollTop, ROW_HEIGHT)
    if (follow && !bottom) onFollowChange(false)
  }
  const onClick = (e: React.MouseEvent) => {
    const a = (e.target as HTMLElement).closest('a.num')
    if (!a) return
    e.preventDefault()
    const n = Number(a.textContent)
    history.replaceState(history.state, '', `#L${n}`)
    setSelected(n)
  }
  const { start, end } = visibleRange(v, scrollTop)
  const lines = []
  const currentLine = current >= 0 ? matches[current] : -1
  for (let i = start; i < end; i++) {
    lines.push(
      <Line
        key={i}
        n={i + 1}
        text={buffer.lines[i]}
        top={rowTop(v, scrollTop, i)}
        query={query}
        selected={selected === i + 1 || currentLine === i}
        match={matchSet.has(i)}
        time={timeOf?.(i)}
      />,
    )
  }
  return (
    <div
      ref={ref}
      className={`logview${timeOf ? ' timed' : ''}${wrap ? ' wrap' : ''}`}
      role="region"
      aria-label="Job log"
      tabIndex={0}
      onScroll={onScroll}
      onClick={onClick}
      style={{ ['--digits' as string]: `${digits + 1}ch` }}
      data-lines={count}
    >
      {wrap && (
        <span ref={probe} className="charprobe" aria-hidden="true">
          0000000000
        </span>
      )}
      <div className="logspace" style={{ height: totalHeight(v) }}>
        {lines}
      </div>
    </div>
  )
}

/** Where the log's "Wrap lines" choice is kept: it holds for every log the user opens. */
export const WRAP_KEY = 'nimbus.log.wrap'

function readWrap(): boolean {
  try {
    return localStorage.getItem(WRAP_KEY) !== 'false'
  } catch {
    return true // storage disabled: the default
  }
}

function writeWrap(on: boolean) {
  try {
    localStorage.setItem(WRAP_KEY, String(on))
  } catch {
    // storage disabled or full: the choice lasts for this page
  }
}

/** The log with its toolbar: search, follow mode, wrapping, raw download. */
export function LogView({ jobId, title, onProgress }: { jobId: number; title?: string; onProgress?: (state: LogState, lines: number) => void }) {
  const { buffer, version, state, error } = useJobLog(jobId)
  const lines = buffer.count
  // The page's job state follows the log (it cannot say "queued" while lines stream in).
  useEffect(() => onProgress?.(state, lines), [state, lines, onProgress])
  const [follow, setFollow] = useState(() => !/^#L\d+$/.test(location.hash))
  const [query, setQuery] = useState('')
  const [timestamps, setTimestamps] = useState(false)
  const [wrap, setWrap] = useState(readWrap)
  const onWrap = (on: boolean) => {
    setWrap(on)
    writeWrap(on)
  }
  const marks = useLogTimes(jobId, timestamps, state)
  const timeOf = useMemo(
    () =>
      timestamps
        ? (i: number) => {
            const at = timeAt(marks, buffer.starts[i] ?? 0)
            return at === undefined ? '' : clockTime(at)
          }
        : undefined,
    // version: new lines need their times
    // eslint-disable-next-line react-hooks/exhaustive-deps
    [timestamps, marks, buffer, version],
  )
  const [matches, setMatches] = useState<number[]>([])
  const [current, setCurrent] = useState(-1)
  useEffect(() => {
    if (!query) {
      setMatches([])
      setCurrent(-1)
      return
    }
    const t = setTimeout(() => {
      const m = buffer.search(query, plainText)
      setMatches(m)
      setCurrent((c) => (m.length === 0 ? -1 : c < 0 ? 0 : Math.min(c, m.length - 1)))
    }, 200)
    return () => clearTimeout(t)
  }, [query, version, buffer])
  const step = (d: number) => {
    if (matches.length === 0) return
    setCurrent((c) => (c + d + matches.length) % matches.length)
  }
  return (
    <section className="logpanel" aria-label={title ?? 'Log'}>
      <div className="logbar" role="toolbar" aria-label="Log tools">
        <label htmlFor="log-search" className="visually-hidden">
          Search the log
        </label>
        <input
          id="log-search"
          type="search"
          placeholder="Search the log"
          value={query}
          onChange={(e) => setQuery(e.target.value)}
          onKeyDown={(e) => {
            if (e.key === 'Enter') {
              e.preventDefault()
              step(e.shiftKey ? -1 : 1)
            }
          }}
        />
        <span className="muted" aria-live="polite" data-testid="match-count">
          {query ? (matches.length ? `${current + 1} of ${matches.length}` : 'no match') : ''}
        </span>
        <button type="button" className="secondary small" onClick={() => step(-1)} disabled={!matches.length} aria-label="Previous match">
          ↑
        </button>
        <button type="button" className="secondary small" onClick={() => step(1)} disabled={!matches.length} aria-label="Next match">
          ↓
        </button>
        <label className="check">
          <input type="checkbox" checked={follow} onChange={(e) => setFollow(e.target.checked)} /> Follow
        </label>
        <label className="check" title="When the server received each line">
          <input type="checkbox" name="timestamps" checked={timestamps} onChange={(e) => setTimestamps(e.target.checked)} /> Timestamps{timestamps ? ` (${zoneName()})` : ''}
        </label>
        <label className="check" title="Long lines continue on the next row instead of past the right edge">
          <input type="checkbox" name="wrap" checked={wrap} onChange={(e) => onWrap(e.target.checked)} /> Wrap lines
        </label>
        <a className="button secondary small" href={endpoints.jobs.logUrl(jobId)} download={`job-${jobId}.log`}>
          Raw log
        </a>
        <span className="muted logstate" data-state={state} role="status">
          {state === 'loading' ? 'Loading…' : state === 'live' ? '● Live' : state === 'done' ? 'Complete' : 'Error'} · {buffer.count.toLocaleString()} {buffer.count === 1 ? "line" : "lines"}
        </span>
      </div>
      {state === 'error' && (
        <p className="error" role="alert">
          {error}
        </p>
      )}
      {state !== 'loading' && buffer.count === 0 ? (
        <div className="empty">{state === 'live' ? 'Waiting for output…' : 'This job wrote nothing.'}</div>
      ) : (
        <LogLines buffer={buffer} version={version} follow={follow} onFollowChange={setFollow} query={query} matches={matches} current={current} timeOf={timeOf} wrap={wrap} />
      )}
    </section>
  )
}
