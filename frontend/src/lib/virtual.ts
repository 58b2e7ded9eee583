// Virtualized rendering of a long list of rows (a job log of millions of lines): only the rows
// in view (plus an overscan) are in the DOM. Rows are all rowHeight tall, or, when the viewport
// carries `rows`, each its own height (wrapped log lines, measured as they are drawn). Browsers
// cap an element's height (Chrome at about 33.5 M px), so past MAX_SCROLL_PX the scroll space is
// compressed: the scrollbar maps linearly onto the content and rows are placed relative to the
// scroll position.

export const MAX_SCROLL_PX = 15_000_000

/** Rows of their own heights. */
export interface Rows {
  readonly count: number
  /** px from the top of the content to row i's top; offset(count) is the content's height. */
  offset(i: number): number
  /** The row whose span holds content y, clamped to the rows. */
  indexAt(y: number): number
}

export interface Viewport {
  count: number // rows
  rowHeight: number // px, of every row when rows is absent
  height: number // the viewport's height, px
  rows?: Rows
}

/** The viewport's rows: its own, or rowHeight apiece. */
export function rowsOf(v: Viewport): Rows {
  if (v.rows) return v.rows
  const h = v.rowHeight
  return { count: v.count, offset: (i) => i * h, indexAt: (y) => Math.max(0, Math.min(v.count - 1, Math.floor(y / h))) }
}

function contentHeight(v: Viewport): number {
  return rowsOf(v).offset(v.count)
}

/** The height of the scrolled content. */
export function totalHeight(v: Viewport): number {
  return Math.min(contentHeight(v), MAX_SCROLL_PX)
}

function scaled(v: Viewport): boolean {
  return contentHeight(v) > MAX_SCROLL_PX
}

/** The content's y (px) at the top of the viewport for a scroll position. */
export function contentTop(v: Viewport, scrollTop: number): number {
  if (!scaled(v)) return scrollTop
  const maxTop = totalHeight(v) - v.height
  const f = maxTop <= 0 ? 0 : Math.min(1, Math.max(0, scrollTop / maxTop))
  return f * Math.max(0, contentHeight(v) - v.height)
}

/** The scroll position that puts content y at the top of the viewport (clamped). */
export function scrollTopAt(v: Viewport, y: number): number {
  const maxTop = Math.max(0, totalHeight(v) - v.height)
  const top = scaled(v) ? (y / Math.max(1, contentHeight(v) - v.height)) * maxTop : y
  return Math.max(0, Math.min(maxTop, top))
}

/** The (fractional) row at the top of the viewport for a scroll position. */
export function firstRow(v: Viewport, scrollTop: number): number {
  if (v.count <= 0) return 0
  const r = rowsOf(v)
  const y = contentTop(v, scrollTop)
  const i = r.indexAt(y)
  const h = r.offset(i + 1) - r.offset(i)
  return i + (h > 0 ? Math.min(1, (y - r.offset(i)) / h) : 0)
}

/** The rows to render: [start, end). */
export function visibleRange(v: Viewport, scrollTop: number, overscan = 10): { start: number; end: number } {
  if (v.count <= 0) return { start: 0, end: 0 }
  const r = rowsOf(v)
  const y = contentTop(v, scrollTop)
  const start = Math.max(0, r.indexAt(y) - overscan)
  // The rows that start above the viewport's bottom edge.
  const bottom = y + v.height
  const last = r.indexAt(bottom)
  const end = Math.min(v.count, (r.offset(last) < bottom ? last + 1 : last) + overscan)
  return { start, end }
}

/** Where row i is drawn, in px from the top of the scrolled content. */
export function rowTop(v: Viewport, scrollTop: number, i: number): number {
  const off = rowsOf(v).offset(i)
  if (!scaled(v)) return off
  return scrollTop + off - contentTop(v, scrollTop)
}

/** The scroll position that shows row i (centred, unless at the ends). */
export function scrollTopFor(v: Viewport, i: number, align: 'center' | 'top' = 'center'): number {
  const r = rowsOf(v)
  const top = r.offset(i)
  const h = r.offset(i + 1) - top
  // A row taller than the viewport shows from its top.
  return scrollTopAt(v, align === 'center' && h < v.height ? top - v.height / 2 + h / 2 : top)
}

/** Whether the viewport is at (or within slack px of) the bottom: follow mode stays on. */
export function atBottom(v: Viewport, scrollTop: number, slack = 4): boolean {
  return scrollTop + v.height >= totalHeight(v) - slack
}

/**
 * Rows of their own heights, kept as a Fenwick tree of heights: a row's offset, the row at a y
 * and a new height each cost O(log n), so a measured row of a million-line log updates the
 * layout without a pass over every row. Heights are whole px, at least 1.
 */
export class RowHeights implements Rows {
  count = 0
  private tree = new Float64Array(1024) // 1-based; tree[k] sums the rows (k - lowbit(k), k]

  /** The rows of these heights, laid out in one pass (a whole log at a new width). */
  static of(heights: ArrayLike<number>): RowHeights {
    const r = new RowHeights()
    const n = heights.length
    r.tree = new Float64Array(Math.max(1024, n + (n >> 2) + 1))
    for (let k = 1; k <= n; k++) r.tree[k] += clampHeight(heights[k - 1])
    for (let k = 1; k <= n; k++) {
      const parent = k + (k & -k)
      if (parent <= n) r.tree[parent] += r.tree[k]
    }
    r.count = n
    return r
  }

  /** Appends a row. */
  push(h: number): void {
    const k = this.count + 1
    if (k >= this.tree.length) {
      // A node's span does not depend on the capacity: growing is a copy.
      const t = new Float64Array(this.tree.length * 2)
      t.set(this.tree)
      this.tree = t
    }
    this.tree[k] = clampHeight(h) + this.prefix(k - 1) - this.prefix(k - (k & -k))
    this.count = k
  }

  /** Row i's height. */
  height(i: number): number {
    return this.prefix(i + 1) - this.prefix(i)
  }

  /** Sets row i's height; returns how much the content grew. */
  set(i: number, h: number): number {
    const d = clampHeight(h) - this.height(i)
    if (d !== 0) for (let k = i + 1; k <= this.count; k += k & -k) this.tree[k] += d
    return d
  }

  offset(i: number): number {
    return this.prefix(Math.max(0, Math.min(i, this.count)))
  }

  indexAt(y: number): number {
    if (this.count === 0 || y <= 0) return 0
    // The most rows whose heights add up to at most y: the row after them holds y.
    let k = 0
    let rest = y
    for (let step = 1 << (31 - Math.clz32(this.count)); step > 0; step >>= 1) {
      const next = k + step
      if (next <= this.count && this.tree[next] <= rest) {
        k = next
        rest -= this.tree[next]
      }
    }
    return Math.min(k, this.count - 1)
  }

  private prefix(n: number): number {
    let s = 0
    for (let k = n; k > 0; k -= k & -k) s += this.tree[k]
    return s
  }
}

function clampHeight(h: number): number {
  return Math.max(1, Math.round(h))
}
