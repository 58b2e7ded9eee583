import { useState } from 'react'
import { Link } from 'react-router'
import { useQuery } from '@tanstack/react-query'
import { endpoints } from '../lib/endpoints'
import type { Pipeline, Record as RecordT, RecordDiff, RecordResource } from '../lib/types'
import { Empty, QueryView } from './ui'
import { bytes, duration, shortSha } from '../lib/format'
import { keys } from '../lib/keys'

// The Provenance panel of a build page: the reproducibility record of one pipeline (what ran,
// on what, with what, as the server and the agent saw it), and, when asked, what differs from
// another pipeline's record. The record itself is the JSON link: an in-toto statement that
// provenance tools read.

type Ann = { [k: string]: unknown }
const ann = (r: RecordResource): Ann => (r.annotations ?? {}) as Ann
const str = (v: unknown) => (v === undefined || v === null ? '' : String(v))

function digestOf(r: RecordResource): string {
  const d = r.digest ?? {}
  return d.sha256 ? `sha256:${d.sha256}` : d.gitCommit ?? ''
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
                <td>{(ann(im).jobs as string[]).join(', ')}</td>
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

export function DiffView({ d }: { d: RecordDiff }) {
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
            {d.differences.map((x) => (
              <tr key={x.category + x.key} data-category={x.category}>
                <td>{x.category}</td>
                <td>
                  <code>{x.key}</code>
                </td>
                <td>
                  <code>{x.a ?? '—'}</code>
                </td>
                <td>
                  <code>{x.b ?? '—'}</code>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <h4>Timings</h4>
      <table>
        <tbody>
          {d.timings.map((t) => (
            <tr key={t.key}>
              <td>{t.key}</td>
              <td>{t.a_ms == null ? '—' : duration(t.a_ms)}</td>
              <td>{t.b_ms == null ? '—' : duration(t.b_ms)}</td>
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
            {(d) => <DiffView d={d} />}
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
