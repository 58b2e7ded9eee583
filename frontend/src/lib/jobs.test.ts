import { jobsOf, shownStatus } from './jobs'
import type { Build } from './types'

describe('job page state', () => {
  it('never says queued while the log streams or has lines', () => {
    expect(shownStatus('queued', 'live', 0)).toBe('running')
    expect(shownStatus('queued', 'loading', 3)).toBe('running')
    expect(shownStatus('queued', 'loading', 0)).toBe('queued')
    expect(shownStatus('success', 'done', 10)).toBe('success')
    expect(shownStatus('failed', 'live', 1)).toBe('failed')
  })
  it('lists every job of the build in order', () => {
    const job = (id: number, name: string, status: Build['status']) => ({ id, name, status })
    const b = {
      pipelines: [
        { name: 'train', stages: [{ name: 'fit', jobs: [job(1, 'a', 'success'), job(2, 'b', 'failed')] }] },
        { name: 'eval', stages: [{ name: 'score', jobs: [job(3, 'c', 'queued')] }] },
      ],
    } as unknown as Build
    expect(jobsOf(b).map((j) => `${j.pipeline}/${j.stage}/${j.name}:${j.status}`)).toEqual(['train/fit/a:success', 'train/fit/b:failed', 'eval/score/c:queued'])
    expect(jobsOf(undefined)).toEqual([])
  })
})
