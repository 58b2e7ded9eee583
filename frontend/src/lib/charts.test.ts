import { OTHER, bucketTotals, dayRange, niceTicks, shapeUsage } from './charts'
import type { Usage } from './types'

const u = (date: string, runner_class: string, repo: string, core_seconds: number, repo_id = 1, bucket: Usage['bucket'] = 'build'): Usage => ({
  date,
  bucket,
  runner_class,
  repo_id,
  repo,
  pipelines: 1,
  core_seconds,
  quota_core_seconds: 0,
  cost: '0.0000',
  written_off: '0.0000',
})

describe('dayRange', () => {
  it('lists every day inclusive, across month ends', () => {
    expect(dayRange('2026-06-29', '2026-07-02')).toEqual(['2026-06-29', '2026-06-30', '2026-07-01', '2026-07-02'])
    expect(dayRange('2026-06-02', '2026-06-01')).toEqual([])
    expect(dayRange('bad', '2026-06-01')).toEqual([])
  })
})

describe('shapeUsage', () => {
  const rows = [
    u('2026-06-01', 'cnb:arch:amd64', 'trainer', 7200),
    u('2026-06-01', 'cnb:arch:amd64:gpu', 'trainer', 3600),
    u('2026-06-01', 'cnb:arch:amd64', 'web', 1800, 2),
    u('2026-06-03', 'cnb:arch:amd64', 'trainer', 3600),
    u('2026-05-31', 'cnb:arch:amd64', 'trainer', 999_999), // outside the range
  ]

  it('sums core-hours per day by runner class, every day present', () => {
    const d = shapeUsage(rows, 'runner_class', '2026-06-01', '2026-06-03')
    expect(d.days).toEqual(['2026-06-01', '2026-06-02', '2026-06-03'])
    expect(d.series).toEqual([
      { key: 'cnb:arch:amd64', values: [2.5, 0, 1], total: 3.5 },
      { key: 'cnb:arch:amd64:gpu', values: [1, 0, 0], total: 1 },
    ])
    expect(d.max).toBe(3.5)
  })

  it('sums by repo and names deleted repos', () => {
    const d = shapeUsage([...rows, u('2026-06-02', 'cnb:arch:amd64', '', 360, 9)], 'repo', '2026-06-01', '2026-06-03')
    expect(d.series.map((s) => [s.key, s.total])).toEqual([
      ['trainer', 4],
      ['web', 0.5],
      ['deleted repo #9', 0.1],
    ])
  })

  it('folds the smallest series into "other"', () => {
    const many = ['a', 'b', 'c', 'd'].map((r, i) => u('2026-06-01', 'x', r, (4 - i) * 3600, i))
    const d = shapeUsage(many, 'repo', '2026-06-01', '2026-06-01', 3)
    expect(d.series.map((s) => [s.key, s.total])).toEqual([
      ['a', 4],
      ['b', 3],
      [OTHER, 3],
    ])
  })

  it('is empty without rows', () => {
    expect(shapeUsage([], 'repo', '2026-06-01', '2026-06-02')).toEqual({ days: ['2026-06-01', '2026-06-02'], series: [], max: 0 })
  })
})

describe('bucketTotals', () => {
  it('adds up builds and workspaces apart, both always present', () => {
    const rows = [
      u('2026-06-01', 'cnb:arch:amd64', 'trainer', 7200),
      { ...u('2026-06-01', 'cnb:arch:amd64', 'trainer', 3600, 1, 'workspace'), pipelines: 2, quota_core_seconds: 3600 },
      u('2026-06-02', 'cnb:arch:amd64:gpu', 'trainer', 1800, 1, 'workspace'),
    ]
    expect(bucketTotals(rows)).toEqual({
      build: { pipelines: 1, core_seconds: 7200, quota_core_seconds: 0 },
      workspace: { pipelines: 3, core_seconds: 5400, quota_core_seconds: 3600 },
    })
    expect(bucketTotals([])).toEqual({
      build: { pipelines: 0, core_seconds: 0, quota_core_seconds: 0 },
      workspace: { pipelines: 0, core_seconds: 0, quota_core_seconds: 0 },
    })
  })
})

describe('niceTicks', () => {
  it('gives round steps that reach the maximum', () => {
    expect(niceTicks(3.5)).toEqual([0, 1, 2, 3, 4])
    expect(niceTicks(170)).toEqual([0, 50, 100, 150, 200])
    expect(niceTicks(0.07)).toEqual([0, 0.02, 0.04, 0.06, 0.08])
    expect(niceTicks(0)).toEqual([0, 1])
  })
})
