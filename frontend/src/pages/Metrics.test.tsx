import { fireEvent, render } from '@testing-library/react'
import { MetricChart, type MetricPoint } from './Metrics'

const pts: MetricPoint[] = [0.71, 0.83, 0.79].map((value, i) => ({
  build: i + 1, pipeline_id: 10 + i, commit: `${i}`.repeat(40), value, at: '2026-12-03T00:00:00Z', previous_pipeline_id: i ? 9 + i : null,
}))

describe('MetricChart', () => {
  it('draws a point per build, higher values higher, and opens the clicked one', () => {
    const open = vi.fn()
    const { container } = render(<MetricChart name="accuracy" points={pts} open={open} />)
    const circles = [...container.querySelectorAll('circle')]
    expect(circles.map((c) => c.getAttribute('data-build'))).toEqual(['1', '2', '3'])
    const cy = circles.map((c) => Number(c.getAttribute('cy')))
    expect(cy[1]).toBeLessThan(cy[2])
    expect(cy[2]).toBeLessThan(cy[0])
    fireEvent.click(circles[2])
    expect(open).toHaveBeenCalledWith(pts[2])
  })

  it('draws one point on an axis around its value, not from below zero', () => {
    const { container } = render(<MetricChart name="accuracy" points={[{ ...pts[0], value: 0.93 }]} open={() => {}} />)
    const labels = [...container.querySelectorAll('svg > text')].map((t) => Number(t.textContent))
    expect(Math.min(...labels)).toBeGreaterThan(0.8)
    expect(Math.max(...labels)).toBeLessThan(1.1)
  })

  it('says when nothing was reported', () => {
    const { container } = render(<MetricChart name="loss" points={[]} open={() => {}} />)
    expect(container.textContent).toContain('No build of this branch reported loss')
  })
})
