// Virtualized rendering of a long list of fixed-height rows (a job log of millions of lines):
// only the rows in view (plus an overscan) are in the DOM. Browsers cap an element's height
// (Chrome at about 33.5 M px), so past MAX_SCROLL_PX the scroll space is compressed: the
// scrollbar maps linearly onto the rows and rows are placed relative to the scroll position.

export const MAX_SCROLL_PX = 15_000_000

export interface Viewport {
  count: number // rows
  rowHeight: number // px
  height: number // the viewport's height, px
}

/** The height of the scrolled content. */
export function totalHeight(v: Viewport): number {
  return Math.min(v.count * v.rowHeight, MAX_SCROLL_PX)
}

function scaled(v: Viewport): boolean {
  return v.count * v.rowHeight > MAX_SCROLL_PX
}

/** The (fractional) row at the top of the viewport for a scroll position. */
export function firstRow(v: Viewport, scrollTop: number): number {
  if (!scaled(v)) return scrollTop / v.rowHeight
  const maxTop = totalHeight(v) - v.height
  const rowsInView = v.height / v.rowHeight
  const f = maxTop <= 0 ? 0 : Math.min(1, Math.max(0, scrollTop / maxTop))
  return f * Math.max(0, v.count - rowsInView)
}

/** The rows to render: [start, end). */
export function visibleRange(v: Viewport, scrollTop: number, overscan = 10): { start: number; end: number } {
  if (v.count <= 0) return { start: 0, end: 0 }
  const first = firstRow(v, scrollTop)
  const start = Math.max(0, Math.floor(first) - overscan)
  const end = Math.min(v.count, Math.ceil(first + v.height / v.rowHeight) + overscan)
  return { start, end }
}

/** Where row i is drawn, in px from the top of the scrolled content. */
export function rowTop(v: Viewport, scrollTop: number, i: number): number {
  if (!scaled(v)) return i * v.rowHeight
  return scrollTop + (i - firstRow(v, scrollTop)) * v.rowHeight
}

/** The scroll position that shows row i (centred, unless at the ends). */
export function scrollTopFor(v: Viewport, i: number, align: 'center' | 'top' = 'center'): number {
  const rowsInView = v.height / v.rowHeight
  const first = align === 'center' ? i - rowsInView / 2 + 0.5 : i
  const maxTop = Math.max(0, totalHeight(v) - v.height)
  let top: number
  if (!scaled(v)) top = first * v.rowHeight
  else {
    const span = Math.max(1, v.count - rowsInView)
    top = (first / span) * maxTop
  }
  return Math.max(0, Math.min(maxTop, top))
}

/** Whether the viewport is at (or within slack px of) the bottom: follow mode stays on. */
export function atBottom(v: Viewport, scrollTop: number, slack = 4): boolean {
  return scrollTop + v.height >= totalHeight(v) - slack
}
