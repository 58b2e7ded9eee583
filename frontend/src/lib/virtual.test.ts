import { MAX_SCROLL_PX, RowHeights, atBottom, contentTop, firstRow, rowTop, scrollTopAt, scrollTopFor, totalHeight, visibleRange } from './virtual'

describe('virtualization math', () => {
  const v = { count: 1000, rowHeight: 20, height: 400 }

  it('renders only the rows in view plus the overscan', () => {
    expect(visibleRange(v, 0, 10)).toEqual({ start: 0, end: 30 })
    expect(visibleRange(v, 2000, 10)).toEqual({ start: 90, end: 130 })
    expect(visibleRange(v, 19_600, 10)).toEqual({ start: 970, end: 1000 })
    expect(visibleRange({ ...v, count: 0 }, 0)).toEqual({ start: 0, end: 0 })
    expect(visibleRange({ ...v, count: 5 }, 0)).toEqual({ start: 0, end: 5 })
  })

  it('places rows at their natural offsets below the cap', () => {
    expect(totalHeight(v)).toBe(20_000)
    expect(rowTop(v, 5000, 300)).toBe(6000)
    expect(firstRow(v, 5010)).toBeCloseTo(250.5)
  })

  it('centres a linked line, clamped at the ends', () => {
    expect(scrollTopFor(v, 500)).toBe(500 * 20 - 200 + 10)
    expect(scrollTopFor(v, 0)).toBe(0)
    expect(scrollTopFor(v, 999)).toBe(20_000 - 400)
    expect(scrollTopFor(v, 100, 'top')).toBe(2000)
  })

  it('knows when the viewport is at the bottom (follow mode)', () => {
    expect(atBottom(v, 19_600)).toBe(true)
    expect(atBottom(v, 19_590, 4)).toBe(false)
    expect(atBottom(v, 19_590, 20)).toBe(true)
  })

  it('compresses the scroll space of huge logs and still reaches every line', () => {
    // 50 MB of 20-byte lines: 2.5 M lines, far past what a browser can scroll.
    const big = { count: 2_500_000, rowHeight: 20, height: 600 }
    expect(totalHeight(big)).toBe(MAX_SCROLL_PX)
    const maxTop = MAX_SCROLL_PX - 600
    expect(firstRow(big, 0)).toBe(0)
    expect(firstRow(big, maxTop)).toBeCloseTo(2_500_000 - 30)
    const mid = visibleRange(big, maxTop / 2, 0)
    expect(mid.end - mid.start).toBeLessThanOrEqual(31)
    expect(mid.start).toBeGreaterThan(1_249_000)
    // The first visible row is drawn at the top of the viewport.
    const top = maxTop / 3
    const f = firstRow(big, top)
    expect(rowTop(big, top, Math.floor(f))).toBeLessThanOrEqual(top)
    expect(rowTop(big, top, Math.floor(f)) + 20).toBeGreaterThan(top)
    // Jumping to a line shows it.
    const want = 1_234_567
    const st = scrollTopFor(big, want)
    const r = visibleRange(big, st, 0)
    expect(want).toBeGreaterThanOrEqual(r.start)
    expect(want).toBeLessThan(r.end)
    expect(atBottom(big, maxTop)).toBe(true)
  })
})

describe('rows of their own heights', () => {
  // Row i is 20 px, but every 10th is 60 (a line wrapped onto three rows).
  const heightOf = (i: number) => (i % 10 === 9 ? 60 : 20)
  const offsetOf = (i: number) => i * 20 + Math.floor(i / 10) * 40

  it('keeps running offsets, finds the row at a y and takes new heights', () => {
    const r = new RowHeights()
    for (let i = 0; i < 5000; i++) r.push(heightOf(i)) // past the first capacity
    expect(r.count).toBe(5000)
    for (const i of [0, 1, 9, 10, 1023, 1024, 1025, 4999, 5000]) expect(r.offset(i)).toBe(offsetOf(i))
    expect(r.height(9)).toBe(60)
    expect(r.indexAt(0)).toBe(0)
    expect(r.indexAt(offsetOf(9))).toBe(9)
    expect(r.indexAt(offsetOf(9) + 59)).toBe(9)
    expect(r.indexAt(offsetOf(10))).toBe(10)
    expect(r.indexAt(1e9)).toBe(4999)
    expect(r.set(3, 100)).toBe(80)
    expect(r.offset(4)).toBe(offsetOf(4) + 80)
    expect(r.offset(5000)).toBe(offsetOf(5000) + 80)
    expect(r.indexAt(offsetOf(4) + 80)).toBe(4)
    // Laid out in one pass, the same.
    const all = RowHeights.of(Array.from({ length: 5000 }, (_, i) => heightOf(i)))
    for (const i of [0, 9, 10, 1024, 3333, 5000]) expect(all.offset(i)).toBe(offsetOf(i))
    all.push(20)
    expect(all.offset(5001)).toBe(offsetOf(5000) + 20)
  })

  it('lays out, jumps and follows with them', () => {
    const rows = RowHeights.of(Array.from({ length: 1000 }, (_, i) => heightOf(i)))
    const v = { count: 1000, rowHeight: 20, height: 400, rows }
    expect(totalHeight(v)).toBe(offsetOf(1000))
    expect(rowTop(v, 5000, 300)).toBe(offsetOf(300))
    // The rows that reach into the view, and 2 more on each side.
    const top = offsetOf(100)
    const { start, end } = visibleRange(v, top, 2)
    expect(start).toBe(98)
    expect(rows.offset(end - 2 - 1)).toBeLessThan(top + 400)
    expect(rows.offset(end - 2)).toBeGreaterThanOrEqual(top + 400)
    // A tall row is centred by its own height.
    expect(scrollTopFor(v, 109)).toBe(offsetOf(109) - 200 + 30)
    expect(atBottom(v, offsetOf(1000) - 400)).toBe(true)
  })

  it('maps the compressed scroll space onto rows of their own heights', () => {
    const n = 2_000_000
    const rows = RowHeights.of(Array.from({ length: n }, (_, i) => heightOf(i)))
    const v = { count: n, rowHeight: 20, height: 600, rows }
    expect(totalHeight(v)).toBe(MAX_SCROLL_PX)
    const maxTop = MAX_SCROLL_PX - 600
    expect(contentTop(v, maxTop)).toBe(offsetOf(n) - 600)
    const want = 1_234_567
    const st = scrollTopFor(v, want)
    const r = visibleRange(v, st, 0)
    expect(want).toBeGreaterThanOrEqual(r.start)
    expect(want).toBeLessThan(r.end)
    // Drawn where the view shows it, and back from the content's y to the scroll position.
    const drawn = rowTop(v, st, want) - st
    expect(drawn).toBeGreaterThan(0)
    expect(drawn).toBeLessThan(600)
    expect(scrollTopAt(v, contentTop(v, st))).toBeCloseTo(st, 3)
  })
})
