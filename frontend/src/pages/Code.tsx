import { Link, useNavigate, useParams, useSearchParams } from 'react-router'
import { useQuery } from '@tanstack/react-query'
import { endpoints } from '../lib/endpoints'
import { keys } from '../lib/keys'
import { RepoHeader, repoPath } from '../components/RepoHeader'
import { Empty, QueryView, StatusBadge } from '../components/ui'
import { ago, bytes, shortSha } from '../lib/format'
import { highlightLines } from '../lib/highlight'
import { isMarkdown, renderMarkdown } from '../lib/markdown'
import type { CodeBlob, CodeCommit, CodeTree } from '../lib/types'

// The repo's code: a directory (/-/tree?ref=&path=) or a file (/-/blob?ref=&path=) at any branch,
// tag or commit, with the branch picker, the path's crumbs and the directory's README rendered.
// Binary and huge files are not shown (a raw link is), LFS pointers say what they point at.
export default function Code() {
  const { org = '', repo = '', kind = 'tree' } = useParams()
  const [params] = useSearchParams()
  const ref = params.get('ref') ?? ''
  const path = params.get('path') ?? ''
  return (
    <section>
      <RepoHeader org={org} repo={repo} />
      <RefBar org={org} repo={repo} current={ref} path={path} kind={kind} />
      <Crumbs org={org} repo={repo} r={ref} path={path} />
      {kind === 'blob' ? <FileView org={org} repo={repo} r={ref} path={path} /> : <TreeView org={org} repo={repo} r={ref} path={path} />}
    </section>
  )
}

/** The link to a path at a ref, as a directory or a file. */
export function codeHref(org: string, repo: string, kind: 'tree' | 'blob', ref: string, path: string) {
  const q = new URLSearchParams()
  if (ref) q.set('ref', ref)
  if (path) q.set('path', path)
  const s = q.toString()
  return `${repoPath(org, repo)}/-/${kind}${s ? `?${s}` : ''}`
}

export function CheckState({ state }: { state: string }) {
  if (!state) return null
  return <StatusBadge status={state === 'failure' ? 'failed' : state === 'pending' ? 'running' : 'success'} label={`checks ${state}`} />
}

function RefBar({ org, repo, current, path, kind }: { org: string; repo: string; current: string; path: string; kind: string }) {
  const q = useQuery({ queryKey: keys.code.branches(org, repo), queryFn: () => endpoints.code.branches(org, repo) })
  const nav = useNavigate()
  const branches = q.data?.items ?? []
  const def = branches.find((b) => b.default)?.name ?? ''
  return (
    <div className="refbar">
      <label>
        Branch{' '}
        <select value={current || def} onChange={(e) => nav(codeHref(org, repo, kind === 'blob' ? 'blob' : 'tree', e.target.value, path))}>
          {current && !branches.some((b) => b.name === current) && <option value={current}>{current}</option>}
          {branches.map((b) => (
            <option key={b.name} value={b.name}>
              {b.name}
            </option>
          ))}
        </select>
      </label>{' '}
      <Link to={`${repoPath(org, repo)}/-/commits${current ? `?ref=${encodeURIComponent(current)}` : ''}`}>Commits</Link> ·{' '}
      <Link to={`${repoPath(org, repo)}/-/branches`}>Branches and tags</Link> · <Link to={`${repoPath(org, repo)}/-/pulls`}>Pull requests</Link>
    </div>
  )
}

function Crumbs({ org, repo, r, path }: { org: string; repo: string; r: string; path: string }) {
  const parts = path ? path.split('/') : []
  return (
    <nav aria-label="Path" className="crumbs">
      <Link to={codeHref(org, repo, 'tree', r, '')}>{repo}</Link>
      {parts.map((p, i) => (
        <span key={i}>
          {' / '}
          {i === parts.length - 1 ? <strong>{p}</strong> : <Link to={codeHref(org, repo, 'tree', r, parts.slice(0, i + 1).join('/'))}>{p}</Link>}
        </span>
      ))}
    </nav>
  )
}

function TreeView({ org, repo, r, path }: { org: string; repo: string; r: string; path: string }) {
  const q = useQuery({ queryKey: keys.code.tree(org, repo, r, path), queryFn: () => endpoints.code.tree(org, repo, r || undefined, path || undefined) })
  return (
    <QueryView q={q} what="Loading the files">
      {(t: CodeTree) => (
        <>
          <LastCommit org={org} repo={repo} sha={t.commit} />
          {t.entries.length === 0 ? (
            <Empty>
              <h3>Nothing here yet</h3>
            </Empty>
          ) : (
            <div className="tablewrap">
              <table aria-label="Files">
                <tbody>
                  {t.entries.map((e) => (
                    <tr key={e.path}>
                      <td>
                        {e.type === 'tree' ? '📁 ' : e.type === 'commit' ? '🔗 ' : '📄 '}
                        {e.type === 'commit' ? (
                          <span title="a submodule">{e.name}</span>
                        ) : (
                          <Link to={codeHref(org, repo, e.type === 'tree' ? 'tree' : 'blob', r, e.path)}>{e.name}</Link>
                        )}
                      </td>
                      <td className="num muted">{e.type === 'blob' ? bytes(e.size) : ''}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )}
          {t.readme && <Readme org={org} repo={repo} r={t.commit} path={t.readme} />}
        </>
      )}
    </QueryView>
  )
}

function LastCommit({ org, repo, sha }: { org: string; repo: string; sha: string }) {
  const q = useQuery({ queryKey: keys.code.commit(org, repo, sha), queryFn: () => endpoints.code.commit(org, repo, sha) })
  if (!q.data) return null
  const c: CodeCommit = q.data
  return (
    <p className="lastcommit">
      <Link to={`${repoPath(org, repo)}/-/commit/${c.sha}`}>
        <code>{shortSha(c.sha)}</code>
      </Link>{' '}
      {c.title} — {c.author_name}, {ago(c.committed_at)} <CheckState state={c.checks} />
    </p>
  )
}

function Readme({ org, repo, r, path }: { org: string; repo: string; r: string; path: string }) {
  const q = useQuery({ queryKey: keys.code.blob(org, repo, r, path), queryFn: () => endpoints.code.blob(org, repo, r, path) })
  if (!q.data?.content) return null
  return (
    <article className="readme" aria-label={path}>
      <h2>{path.split('/').pop()}</h2>
      {isMarkdown(path) ? <div className="markdown" dangerouslySetInnerHTML={{ __html: renderMarkdown(q.data.content) }} /> : <pre>{q.data.content}</pre>}
    </article>
  )
}

function FileView({ org, repo, r, path }: { org: string; repo: string; r: string; path: string }) {
  const q = useQuery({ queryKey: keys.code.blob(org, repo, r, path), queryFn: () => endpoints.code.blob(org, repo, r || undefined, path) })
  return (
    <QueryView q={q} what="Loading the file">
      {(b: CodeBlob) => {
        const raw = endpoints.code.rawHref(org, repo, b.commit, path)
        return (
          <article className="fileview" aria-label={path}>
            <header>
              <span className="muted">
                {bytes(b.size)} · mode {b.mode} · at <code>{shortSha(b.commit)}</code>
              </span>{' '}
              <a href={raw}>Raw</a>
            </header>
            {b.too_large ? (
              <p className="muted">This file is too large to show ({bytes(b.size)}). Download it raw.</p>
            ) : b.binary ? (
              <p className="muted">Binary file not shown. Download it raw.</p>
            ) : (
              <>
                {b.lfs && (
                  <p className="notice">
                    A Git LFS pointer: the file is {bytes(b.lfs.size)}, <code>{b.lfs.oid}</code>, kept outside git.
                  </p>
                )}
                {isMarkdown(path) ? (
                  <div className="markdown" dangerouslySetInnerHTML={{ __html: renderMarkdown(b.content ?? '') }} />
                ) : (
                  <Lines text={b.content ?? ''} path={path} />
                )}
              </>
            )}
          </article>
        )
      }}
    </QueryView>
  )
}

function Lines({ text, path }: { text: string; path: string }) {
  const lines = highlightLines(text, path)
  return (
    <table className="code">
      <tbody>
        {lines.map((l, i) => (
          <tr key={i} id={`L${i + 1}`}>
            <td className="ln">{i + 1}</td>
            <td className="code" dangerouslySetInnerHTML={{ __html: l }} />
          </tr>
        ))}
      </tbody>
    </table>
  )
}
