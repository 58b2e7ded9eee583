// Layout of a pipeline's graph: stages left to right in order; the jobs of a parallel stage
// stacked in one column, the jobs of a serial stage one after the other in a row. Each job gets
// a grid cell (col, row) and the edges say what waits for what.
import type { Stage, Status } from './types'

export interface PlacedJob {
  id: number
  name: string
  status: Status
  exit_code?: number
  col: number
  row: number
}

export interface PlacedStage {
  name: string
  kind?: 'fail' | 'end'
  status: Status
  parallel: boolean
  col: number // first column
  width: number // columns
  height: number // rows
  jobs: PlacedJob[]
}

export interface PipelineLayout {
  stages: PlacedStage[]
  cols: number
  rows: number
  edges: [number, number][] // job id → job id it precedes
}

export function layoutPipeline(stages: Stage[]): PipelineLayout {
  const placed: PlacedStage[] = []
  const edges: [number, number][] = []
  let col = 0
  let rows = 1
  let prevExits: number[] = []
  for (const st of stages) {
    // A stage of one job is the same either way; draw it as serial.
    const parallel = st.parallel && st.jobs.length > 1
    const jobs: PlacedJob[] = st.jobs.map((j, i) => ({
      id: j.id,
      name: j.name,
      status: j.status,
      exit_code: j.exit_code,
      col: parallel ? col : col + i,
      row: parallel ? i : 0,
    }))
    const width = parallel ? 1 : Math.max(1, jobs.length)
    const height = parallel ? jobs.length : 1
    rows = Math.max(rows, height)
    const entries = parallel ? jobs.map((j) => j.id) : jobs.slice(0, 1).map((j) => j.id)
    for (const from of prevExits) for (const to of entries) edges.push([from, to])
    if (!parallel) for (let i = 1; i < jobs.length; i++) edges.push([jobs[i - 1].id, jobs[i].id])
    if (jobs.length > 0) prevExits = parallel ? jobs.map((j) => j.id) : [jobs[jobs.length - 1].id]
    placed.push({ name: st.name, kind: st.kind, status: st.status, parallel, col, width, height, jobs })
    col += width
  }
  return { stages: placed, cols: col, rows, edges }
}
