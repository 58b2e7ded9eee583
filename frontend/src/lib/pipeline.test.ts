import { layoutPipeline } from './pipeline'
import type { Stage } from './types'

const job = (id: number, name = 'j' + id) => ({ id, name, status: 'queued' as const })

describe('layoutPipeline', () => {
  it('stacks parallel jobs in one column and lines serial jobs up in a row', () => {
    const stages: Stage[] = [
      { name: 'build', status: 'success', parallel: true, jobs: [job(1), job(2), job(3)] },
      { name: 'test', status: 'running', parallel: false, jobs: [job(4), job(5)] },
      { name: 'deploy', status: 'queued', parallel: false, jobs: [job(6)] },
    ]
    const l = layoutPipeline(stages)
    expect(l.cols).toBe(4)
    expect(l.rows).toBe(3)
    expect(l.stages.map((s) => [s.name, s.col, s.width, s.height, s.parallel])).toEqual([
      ['build', 0, 1, 3, true],
      ['test', 1, 2, 1, false],
      ['deploy', 3, 1, 1, false],
    ])
    expect(l.stages[0].jobs.map((j) => [j.col, j.row])).toEqual([
      [0, 0],
      [0, 1],
      [0, 2],
    ])
    expect(l.stages[1].jobs.map((j) => [j.col, j.row])).toEqual([
      [1, 0],
      [2, 0],
    ])
    // Every parallel job precedes the next stage's first job; serial jobs chain.
    expect(l.edges).toEqual([
      [1, 4],
      [2, 4],
      [3, 4],
      [4, 5],
      [5, 6],
    ])
  })

  it('fans out into a parallel stage and treats a single job as serial', () => {
    const l = layoutPipeline([
      { name: 'a', status: 'success', parallel: true, jobs: [job(1)] },
      { name: 'b', status: 'queued', parallel: true, jobs: [job(2), job(3)] },
      { name: 'c', status: 'queued', kind: 'end', parallel: false, jobs: [] },
      { name: 'd', status: 'queued', parallel: false, jobs: [job(4)] },
    ])
    expect(l.stages[0].parallel).toBe(false)
    expect(l.edges).toEqual([
      [1, 2],
      [1, 3],
      [2, 4],
      [3, 4],
    ])
    expect(l.stages[2]).toMatchObject({ kind: 'end', width: 1, col: 2 })
    expect(l.stages[3].col).toBe(3)
  })

  it('lays out an empty pipeline', () => {
    expect(layoutPipeline([])).toEqual({ stages: [], cols: 0, rows: 1, edges: [] })
  })
})
