import type { Build, Status } from './types'
import type { LogState } from '../components/LogView'

/** One job of a build, where it sits, for the job page's side list. */
export type JobEntry = { id: number; name: string; status: Status; pipeline: string; stage: string }

/** Every job of the build in pipeline, stage and job order. */
export function jobsOf(b: Build | undefined): JobEntry[] {
  const out: JobEntry[] = []
  for (const p of b?.pipelines ?? []) for (const st of p.stages ?? []) for (const j of st.jobs) out.push({ id: j.id, name: j.name, status: j.status, pipeline: p.name, stage: st.name })
  return out
}

/**
 * The state the job page shows: the build's answer, corrected by what the log already proves.
 * The build is polled every 2 s and the log streams at once, so without this a job whose lines
 * are arriving could still read "queued".
 */
export function shownStatus(status: Status, log: LogState | undefined, lines: number): Status {
  if (status === 'queued' && (log === 'live' || lines > 0)) return 'running'
  return status
}
