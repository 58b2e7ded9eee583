import { MAX_SCROLL_PX, atBottom, firstRow, rowTop, scrollTopFor, totalHeight, visibleRange } from './virtual'

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
