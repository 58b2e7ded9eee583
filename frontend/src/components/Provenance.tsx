import { Fragment, Suspense, lazy, useState } from 'react'
import { Link } from 'react-router'
import { useQuery } from '@tanstack/react-query'
import { endpoints } from '../lib/endpoints'
import type { Pipeline, Record as RecordT, RecordDiff, RecordResource } from '../lib/types'
import { Empty, QueryView } from './ui'
import { bytes, duration, shortSha } from '../lib/format'
import { keys } from '../lib/keys'
import { diffSign, diffText, type DiffLine } from '../lib/linediff'

// The Provenance panel of a build page: the reproducibility record of one pipeline (what ran,
// on what, with what, as the server and the agent saw it), and, when asked, what differs from
// another pipeline's record. The record itself is the JSON link: an in-toto statement that
// provenance tools read.

type Ann = { [k: string]: unknown }
const ann = (r: RecordResource): Ann => (r.annotations ?? {}) as Ann
const str = (v: unknown) => (v === undefined || v === null ? '' : String(v))

// The diff table highlights the script, and the highlighter is big: the build page loads it only
// when a compared record has a script that changed.
const DiffLines = lazy(() => import('./DiffView').then((m) => ({ default: m.DiffLines })))

/** A script's diff until the table has loaded: the same lines, plain. */
function PlainDiff({ lines }: { lines: DiffLine[] }) {
  return <pre>{lines.map((l) => diffSign[l.kind] + l.text).join('\n')}</pre>
}

function digestOf(r: RecordResource): string {
  const d = r.digest ?? {}
  return d.sha256 ? `sha256:${d.sha256}` : d.gitCommit ?? ''
}

/**
 * A job as people name it: "stage › job", or the job alone when its stage has its name. A record
 * keys jobs as "0.1 build / test", with the positions that keep two jobs of one name apart (the
 * key stays in the label's title).
 */
export function jobLabel(key: string): string {
  const m = /^\d+\.\d+ ([^]*)$/.exec(key)
  if (!m) return key
  const names = m[1]
  // A name may hold " / " itself: a stage and a job of one name are two equal halves.
  const half = (names.length - 3) / 2
  if (Number.isInteger(half) && half > 0 && names.slice(half, half + 3) === ' / ' && names.slice(0, half) === names.slice(half + 3)) return names.slice(0, half)
  const cut = names.indexOf(' / ')
  return cut < 0 ? names : `${names.slice(0, cut)} › ${names.slice(cut + 3)}`
}

type Plan = { [k: string]: unknown }

/** The job of a plan path ("stages[0].jobs[1].script") by name, from the plan of this run. */
function planJob(plan: Plan | undefined, path: string): { job: string; rest: string } | null {
  const m = /^(stages|failStages|endStages)\[(\d+)\]\.jobs\[(\d+)\]\.(.+)$/.exec(path)
  if (!m || !plan) return null
  const stage = (plan[m[1]] as { name?: string; jobs?: { name?: string }[] }[] | undefined)?.[Number(m[2])]
  const job = stage?.jobs?.[Number(m[3])]
  if (!stage?.name || !job?.name) return null
  return { job: stage.name === job.name ? job.name : `${stage.name} › ${job.name}`, rest: m[4] }
}

/** How a difference's key reads: jobs by name, not by their record key or plan path. */
export function factLabel(category: string, key: string, plan?: Plan): string {
  if (category === 'image') return jobLabel(key)
  if (category === 'outcome') {
    const m = /^(.*) (status|exit code|reason)$/.exec(key)
    if (m && m[1] !== 'pipeline') return `${jobLabel(m[1])}: ${m[2]}`
    return key
  }
  if (category === 'plan') {
    const j = planJob(plan, key)
    if (j) return `${j.job}: ${j.rest}`
  }
  return key
}

/**
 * A plan value that is text of its own (a job's script, any string of several lines): both
 * sides as their text, for a line diff. The record holds plan values as JSON.
 */
export function scriptOf(x: RecordDiff['differences'][number]): { a: string; b: string } | null {
  if (x.category !== 'plan') return null
  const text = (v: string | null): string | null | undefined => {
    if (v === null) return null
    try {
      const t: unknown = JSON.parse(v)
      return typeof t === 'string' ? t : undefined
    } catch {
      return undefined
    }
  }
  const a = text(x.a)
  const b = text(x.b)
  if (a === undefined || b === undefined) return null
  if (!/(^|\.)script$/.test(x.key) && !`${a ?? ''}${b ?? ''}`.includes('\n')) return null
  return { a: a ?? '', b: b ?? '' }
}

function Facts({ rows }: { rows: [string, React.ReactNode][] }) {
  return (
    <dl className="summary">
      {rows
        .filter(([, v]) => v !== '' && v !== undefined && v !== null)
        .map(([k, v]) => (
          <div key={k}>
            <dt>{k}</dt>
            <dd>{v}</dd>
          </div>
        ))}
    </dl>
  )
}

function Files({ title, files, testid }: { title: string; files: RecordResource[]; testid: string }) {
  return (
    <>
      <h4>{title}</h4>
      {files.length === 0 ? (
        <Empty>None.</Empty>
      ) : (
        <table data-testid={testid}>
          <thead>
            <tr>
              <th>File</th>
              <th>Size</th>
              <th>Digest</th>
            </tr>
          </thead>
          <tbody>
            {files.map((f) => {
              const a = ann(f)
              return (
                <tr key={f.name}>
                  <td>
                    {str(a.package)}/{a.buildScoped ? <span title="this build's hand-off version">$CNB_BUILD_ID</span> : str(a.version)}/{str(a.file)}
                    {a.repo ? <span className="muted"> ({str(a.repo)})</span> : null}
                  </td>
                  <td>{typeof a.size === 'number' ? bytes(a.size) : ''}</td>
                  <td>
                    <code>{digestOf(f)}</code>
                  </td>
                </tr>
              )
            })}
          </tbody>
        </table>
      )}
    </>
  )
}

export function RecordView({ rec, jsonHref }: { rec: RecordT; jsonHref: string }) {
  const bd = rec.predicate.buildDefinition
  const rd = rec.predicate.runDetails
  const commit = bd.resolvedDependencies.find((d) => d.digest?.gitCommit)
  const images = bd.resolvedDependencies.filter((d) => str(ann(d).ref) !== '' && ann(d).jobs)
  const pulled = bd.resolvedDependencies.filter((d) => ann(d).package !== undefined)
  const v = rd.builder.version ?? {}
  const gpus = (rd.builder.builderDependencies ?? []).map((g) => `${str(ann(g).model)} (${str(ann(g).memoryMiB)} MiB)`)
  const r = bd.internalParameters.runner
  const env = Object.entries(bd.internalParameters.env).sort(([a], [b]) => a.localeCompare(b))
  return (
    <div data-testid="record">
      <Facts
        rows={[
          ['Commit', commit && <code title={commit.digest?.gitCommit}>{shortSha(commit.digest?.gitCommit ?? '')}</code>],
          ['Ref', bd.externalParameters.ref],
          ['Runner', `${r.class}, ${r.cpus} cores, ${r.memoryGiB} GiB${r.gpu ? `, GPU ${r.gpu}` : ''}`],
          ['Agent', `${v['agent-name'] ?? ''} ${v['nimbus-agent'] ? `(agent ${v['nimbus-agent']})` : ''}`.trim()],
          ['CPU', v['cpu-model'] ?? ''],
          ['GPU', gpus.join(', ')],
          ['NVIDIA driver', v['nvidia-driver'] ?? ''],
          ['CUDA', v['cuda'] ?? ''],
          ['Kernel', v['kernel'] ?? ''],
          ['Engine', v['docker-engine'] ?? ''],
        ]}
      />
      <h4>Images</h4>
      {images.length === 0 ? (
        <Empty>No job ran a container image.</Empty>
      ) : (
        <table data-testid="record-images">
          <thead>
            <tr>
              <th>Image</th>
              <th>Digest</th>
              <th>Jobs</th>
            </tr>
          </thead>
          <tbody>
            {images.map((im) => (
              <tr key={str(ann(im).ref)}>
                <td>{str(ann(im).image)}</td>
                <td>
                  <code>{str(ann(im).ref)}</code>
                </td>
                <td>
                  {(ann(im).jobs as string[]).map((j, i) => (
                    <Fragment key={j}>
                      {i > 0 && ', '}
                      <span title={j}>{jobLabel(j)}</span>
                    </Fragment>
                  ))}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <Files title="Model files pulled" files={pulled} testid="record-inputs" />
      <Files title="Model files pushed" files={rec.subject} testid="record-outputs" />
      <h4>Env</h4>
      <table data-testid="record-env">
        <tbody>
          {env.map(([k, val]) => (
            <tr key={k}>
              <td>
                <code>{k}</code>
              </td>
              <td>
                <code>{val}</code>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <p className="muted">
        Secrets, by name only: {bd.internalParameters.secrets.join(', ') || 'none'}
        {bd.internalParameters.imports.length > 0 && <> · env files: {bd.internalParameters.imports.join(', ')}</>}
      </p>
      <p>
        <a href={jsonHref} data-testid="record-json">
          Record as JSON (in-toto / SLSA provenance)
        </a>
      </p>
    </div>
  )
}

function ScriptDiff({ lines }: { lines: DiffLine[] }) {
  return (
    <Suspense fallback={<PlainDiff lines={lines} />}>
      <DiffLines lines={lines} path="script.sh" />
    </Suspense>
  )
}

/** What differs between this run's record and the other's (a script as a line diff), and the timings. */
export function DiffView({ d, plan }: { d: RecordDiff; plan?: Plan }) {
  return (
    <div data-testid="record-diff">
      {d.differences.length === 0 ? (
        <p data-testid="record-diff-same">Nothing differs but the timings.</p>
      ) : (
        <table>
          <thead>
            <tr>
              <th>What</th>
              <th>Key</th>
              <th>This run</th>
              <th>Other run</th>
            </tr>
          </thead>
          <tbody>
            {d.differences.map((x) => {
              const script = scriptOf(x)
              return (
                <tr key={x.category + x.key} data-category={x.category}>
                  <td>{x.category}</td>
                  <td>
                    <code title={x.key}>{factLabel(x.category, x.key, plan)}</code>
                  </td>
                  {script ? (
                    <td colSpan={2} className="scriptdiff" data-testid="script-diff">
                      {/* From the other run to this one: the other is the base (the previous
                          point of a metric, a pull request's base) that this run is read against. */}
                      <span className="muted">
                        − other run{x.b === null && ' (none)'}, + this run{x.a === null && ' (none)'}
                      </span>
                      <ScriptDiff lines={diffText(script.b, script.a)} />
                    </td>
                  ) : (
                    <>
                      <td>
                        <code>{x.a ?? '—'}</code>
                      </td>
                      <td>
                        <code>{x.b ?? '—'}</code>
                      </td>
                    </>
                  )}
                </tr>
              )
            })}
          </tbody>
        </table>
      )}
      <h4>Timings</h4>
      <table data-testid="record-timings">
        <thead>
          <tr>
            <th scope="col">Job</th>
            <th scope="col" className="num">
              This run
            </th>
            <th scope="col" className="num">
              Other run
            </th>
          </tr>
        </thead>
        <tbody>
          {d.timings.map((t) => (
            <tr key={t.key}>
              <td title={t.key}>{t.key === 'pipeline' ? 'Whole pipeline' : jobLabel(t.key)}</td>
              <td className="num">{t.a_ms == null ? '—' : duration(t.a_ms)}</td>
              <td className="num">{t.b_ms == null ? '—' : duration(t.b_ms)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  )
}

/** The panel: a tab per pipeline, its record, and the diff against `compare` when set. */
export function Provenance({
  org,
  repo,
  pipelines,
  selected,
  compare,
  onSelect,
  onCompare,
}: {
  org: string
  repo: string
  pipelines: Pipeline[]
  selected?: number
  compare?: number
  onSelect: (id: number) => void
  onCompare: (id: number) => void
}) {
  const current = pipelines.find((p) => p.id === selected) ?? pipelines[0]
  const [other, setOther] = useState('')
  const rec = useQuery({ queryKey: keys.repos.record(org, repo, current.id), queryFn: () => endpoints.repos.records.get(org, repo, current.id) })
  const diff = useQuery({
    queryKey: keys.repos.recordDiff(org, repo, current.id, compare),
    queryFn: () => endpoints.repos.records.compare(org, repo, current.id, compare!),
    enabled: !!compare,
  })
  return (
    <section aria-label="Provenance" data-testid="provenance" className="provenance">
      <h2>Provenance</h2>
      <div className="tabs" role="tablist">
        {pipelines.map((p) => (
          <button key={p.id} type="button" role="tab" aria-selected={p.id === current.id} className={p.id === current.id ? '' : 'secondary'} onClick={() => onSelect(p.id)}>
            {p.name}
          </button>
        ))}
      </div>
      {compare ? (
        <>
          <h3>
            Compared with pipeline {compare} <Link to={`?pipeline=${current.id}`}>(stop comparing)</Link>
          </h3>
          <QueryView q={diff} what="Comparing the records">
            {(d) => <DiffView d={d} plan={rec.data?.predicate.buildDefinition.externalParameters.plan} />}
          </QueryView>
        </>
      ) : (
        <form
          className="inline"
          onSubmit={(e) => {
            e.preventDefault()
            const n = Number(other)
            if (n > 0) onCompare(n)
          }}
        >
          <label>
            Compare with pipeline id <input value={other} onChange={(e) => setOther(e.target.value)} inputMode="numeric" size={8} />
          </label>{' '}
          <button type="submit" className="secondary">
            Compare
          </button>
        </form>
      )}
      <QueryView q={rec} what="Loading the record">
        {(r) => <RecordView rec={r} jsonHref={endpoints.repos.records.url(org, repo, current.id)} />}
      </QueryView>
    </section>
  )
}
