import { useState } from 'react'
import { useNavigate, useParams, useSearchParams } from 'react-router'
import { useQuery } from '@tanstack/react-query'
import { endpoints } from '../lib/endpoints'
import { RepoHeader, repoPath } from '../components/RepoHeader'
import { Empty, QueryView } from '../components/ui'
import { shortSha } from '../lib/format'
import { keys } from '../lib/keys'

// Metrics across commits: every number a job reported as `##[set-output metric.<name>=<n>]`,
// charted over the builds of a branch. A point opens its build with the record diff against
// the point before: what changed between the good model and the bad one.

export type MetricPoint = { build: number; pipeline_id: number; commit: string; value: number; at: string; previous_pipeline_id: number | null }

const W = 640
const H = 200
const PAD = 36

/** An inline SVG line chart; a click on a point calls open. */
export function MetricChart({ name, points, open }: { name: string; points: MetricPoint[]; open: (p: MetricPoint) => void }) {
  if (points.length === 0) return <Empty>No build of this branch reported {name}.</Empty>
  const vs = points.map((p) => p.value)
  let lo = Math.min(...vs)
  let hi = Math.max(...vs)
  if (lo === hi) {
    // One value (or one point): an axis of ±10 % around it. ±1 drew an accuracy of 0.93
    // between -0.07 and 1.93, values no run can have.
    const pad = lo === 0 ? 1 : Math.abs(lo) * 0.1
    lo -= pad
    hi += pad
  }
  const x = (i: number) => (points.length === 1 ? W / 2 : PAD + (i * (W - 2 * PAD)) / (points.length - 1))
  const y = (v: number) => H - PAD + ((lo - v) * (H - 2 * PAD)) / (hi - lo)
  const path = points.map((p, i) => `${i === 0 ? 'M' : 'L'}${x(i).toFixed(1)},${y(p.value).toFixed(1)}`).join(' ')
  return (
    <figure className="metric" data-metric={name}>
      <figcaption>{name}</figcaption>
      <svg viewBox={`0 0 ${W} ${H}`} width={W} height={H} role="img" aria-label={`${name} across builds`}>
        <line x1={PAD} y1={H - PAD} x2={W - PAD} y2={H - PAD} stroke="currentColor" opacity={0.3} />
        <text x={4} y={y(hi) + 4} fontSize={11}>
          {hi.toPrecision(4)}
        </text>
        <text x={4} y={y(lo) + 4} fontSize={11}>
          {lo.toPrecision(4)}
        </text>
        <path d={path} fill="none" stroke="#2563eb" strokeWidth={2} />
        {points.map((p, i) => (
          <g key={p.build}>
            <circle
              cx={x(i)}
              cy={y(p.value)}
              r={6}
              fill="#2563eb"
              data-build={p.build}
              data-value={p.value}
              style={{ cursor: 'pointer' }}
              onClick={() => open(p)}
            >
              <title>{`#${p.build} ${shortSha(p.commit)}: ${p.value}`}</title>
            </circle>
            <text x={x(i)} y={H - PAD + 16} fontSize={11} textAnchor="middle">
              #{p.build}
            </text>
          </g>
        ))}
      </svg>
    </figure>
  )
}

function Series({ org, repo, branch, name }: { org: string; repo: string; branch: string; name: string }) {
  const navigate = useNavigate()
  const q = useQuery({ queryKey: keys.repos.metric(org, repo, branch, name), queryFn: () => endpoints.repos.metrics(org, repo, branch, name) })
  return (
    <QueryView q={q} what={`Loading ${name}`}>
      {(s) => (
        <MetricChart
          name={name}
          points={s.points}
          open={(p) =>
            navigate(`${repoPath(org, repo)}/builds/${p.build}?pipeline=${p.pipeline_id}${p.previous_pipeline_id ? `&compare=${p.previous_pipeline_id}` : ''}`)
          }
        />
      )}
    </QueryView>
  )
}

export default function Metrics() {
  const { org = '', repo = '' } = useParams()
  const [params, setParams] = useSearchParams()
  const branch = params.get('branch') ?? ''
  const [typed, setTyped] = useState(branch)
  const names = useQuery({ queryKey: keys.repos.metricNames(org, repo, branch), queryFn: () => endpoints.repos.metrics(org, repo, branch) })
  return (
    <section>
      <RepoHeader org={org} repo={repo} />
      <div className="pagehead">
        <h1>Metrics</h1>
        <form
          className="inline"
          onSubmit={(e) => {
            e.preventDefault()
            setParams(typed ? { branch: typed } : {})
          }}
        >
          <label>
            Branch <input value={typed} onChange={(e) => setTyped(e.target.value)} placeholder="default branch" size={16} />
          </label>{' '}
          <button type="submit" className="secondary">
            Show
          </button>
        </form>
      </div>
      <p className="muted">
        A job reports a metric by printing <code>##[set-output metric.accuracy=0.93]</code>. Click a point to open its build and what changed since the point before.
      </p>
      <QueryView q={names} what="Loading the metrics">
        {(n) =>
          n.names.length === 0 ? (
            <Empty>No build of {n.branch} reported a metric yet.</Empty>
          ) : (
            <div className="metrics">
              {n.names.map((name) => (
                <Series key={name} org={org} repo={repo} branch={n.branch} name={name} />
              ))}
            </div>
          )
        }
      </QueryView>
    </section>
  )
}
