import { render } from '@testing-library/react'
import { StackedBars } from './StackedBars'
import { shapeUsage } from '../lib/charts'

describe('StackedBars', () => {
  it('draws one bar segment per non-zero value, a legend and a data table', () => {
    const data = shapeUsage(
      [
        { date: '2026-06-01', bucket: 'build', runner_class: 'cpu', repo_id: 1, repo: 'a', pipelines: 1, core_seconds: 7200, quota_core_seconds: 0, cost: '0', written_off: '0' },
        { date: '2026-06-02', bucket: 'build', runner_class: 'gpu', repo_id: 1, repo: 'a', pipelines: 1, core_seconds: 3600, quota_core_seconds: 0, cost: '0', written_off: '0' },
        { date: '2026-06-02', bucket: 'build', runner_class: 'cpu', repo_id: 1, repo: 'a', pipelines: 1, core_seconds: 3600, quota_core_seconds: 0, cost: '0', written_off: '0' },
      ],
      'runner_class',
      '2026-06-01',
      '2026-06-03',
    )
    const { container, getByText } = render(<StackedBars data={data} title="By class" />)
    expect(container.querySelectorAll('rect')).toHaveLength(3)
    expect(container.querySelectorAll('.legend li')).toHaveLength(2)
    expect(getByText('3.00 core-hours')).toBeTruthy()
    const cells = [...container.querySelectorAll('tbody tr')].map((tr) => [...tr.children].map((c) => c.textContent))
    expect(cells).toEqual([
      ['2026-06-01', '2.00', '0.00'],
      ['2026-06-02', '1.00', '1.00'],
      ['2026-06-03', '0.00', '0.00'],
    ])
  })

  it('says when there is nothing to draw', () => {
    const { getByText } = render(<StackedBars data={shapeUsage([], 'repo', '2026-06-01', '2026-06-02')} title="By repo" />)
    expect(getByText('No settled usage in this period.')).toBeTruthy()
  })
})
