import { useState, type ReactNode } from 'react'
import { Link, useLocation, useNavigate, useParams, useSearchParams } from 'react-router'
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { endpoints } from '../lib/endpoints'
import { keys } from '../lib/keys'
import { RepoHeader, repoPath } from '../components/RepoHeader'
import { DiffFile } from '../components/DiffView'
import { Empty, FormError, Notice, QueryView } from '../components/ui'
import { ago, shortSha } from '../lib/format'
import type { CodeCommit } from '../lib/types'
import { CheckState, codeHref } from './Code'

// The repo's history: commits of a ref, a page at a time (/-/commits?ref=&cursor=), one commit
// with its whole diff and its pipelines (/-/commit/:sha), and the branches and tags, each with
// its last commit and check state (/-/branches).
export default function History() {
  const { org = '', repo = '', sha } = useParams()
  const where = useLocation().pathname
  return (
    <section>
      <RepoHeader org={org} repo={repo} />
      {sha ? <CommitView org={org} repo={repo} sha={sha} /> : where.endsWith('/-/branches') ? <Refs org={org} repo={repo} /> : <CommitList org={org} repo={repo} />}
    </section>
  )
}

function CommitRow({ org, repo, c }: { org: string; repo: string; c: CodeCommit }) {
  return (
    <tr>
      <td>
        <Link to={`${repoPath(org, repo)}/-/commit/${c.sha}`}>{c.title || '(no message)'}</Link>
        <div className="muted">
          {c.author_name} · {ago(c.authored_at)}
        </div>
      </td>
      <td>
        <CheckState state={c.checks} />
      </td>
      <td>
        <code title={c.sha}>{shortSha(c.sha)}</code>
      </td>
    </tr>
  )
}

function CommitList({ org, repo }: { org: string; repo: string }) {
  const [params] = useSearchParams()
  const ref = params.get('ref') ?? ''
  const cursor = params.get('cursor') ?? ''
  const q = useQuery({ queryKey: keys.code.commits(org, repo, ref, cursor), queryFn: () => endpoints.code.commits(org, repo, ref || undefined, cursor || undefined) })
  const here = `${repoPath(org, repo)}/-/commits`
  return (
    <>
      <h1>Commits{ref && <> on {ref}</>}</h1>
      <QueryView q={q} what="Loading the commits">
        {(page) =>
          page.items.length === 0 ? (
            <Empty>
              <h3>No commits</h3>
            </Empty>
          ) : (
            <>
              <div className="tablewrap">
                <table aria-label="Commits">
                  <tbody>
                    {page.items.map((c) => (
                      <CommitRow key={c.sha} org={org} repo={repo} c={c} />
                    ))}
                  </tbody>
                </table>
              </div>
              {page.next_cursor && (
                <p>
                  <Link to={`${here}?${new URLSearchParams({ ...(ref ? { ref } : {}), cursor: page.next_cursor })}`}>Older commits →</Link>
                </p>
              )}
            </>
          )
        }
      </QueryView>
    </>
  )
}

function CommitView({ org, repo, sha }: { org: string; repo: string; sha: string }) {
  const q = useQuery({ queryKey: keys.code.commit(org, repo, sha), queryFn: () => endpoints.code.commit(org, repo, sha) })
  return (
    <QueryView q={q} what="Loading the commit">
      {(c) => (
        <>
          <h1>{c.title || '(no message)'}</h1>
          {c.message !== c.title && <pre className="message">{c.message.slice(c.title.length).trim()}</pre>}
          <p className="muted">
            {c.author_name} &lt;{c.author_email}&gt; authored {ago(c.authored_at)} · <code>{c.sha}</code>
            {c.parents.map((p) => (
              <span key={p}>
                {' '}
                · parent <Link to={`${repoPath(org, repo)}/-/commit/${p}`}>{shortSha(p)}</Link>
              </span>
            ))}{' '}
            · <Link to={codeHref(org, repo, 'tree', c.sha, '')}>Browse files</Link>
          </p>
          <CommitPipelines org={org} repo={repo} sha={c.sha} />
          <p>
            {c.files.length} files changed, <span className="adds">+{c.files.reduce((n, f) => n + f.additions, 0)}</span>{' '}
            <span className="dels">−{c.files.reduce((n, f) => n + f.deletions, 0)}</span>
          </p>
          {c.files.map((f) => (
            <DiffFile key={f.path} file={f} />
          ))}
        </>
      )}
    </QueryView>
  )
}

function CommitPipelines({ org, repo, sha }: { org: string; repo: string; sha: string }) {
  const q = useQuery({ queryKey: keys.code.checks(org, repo, sha), queryFn: () => endpoints.code.checks(org, repo, sha) })
  if (!q.data || (q.data.pipelines.length === 0 && q.data.statuses.length === 0)) return null
  return (
    <div className="tablewrap">
      <table aria-label="Checks">
        <thead>
          <tr>
            <th scope="col">Check</th>
            <th scope="col">State</th>
          </tr>
        </thead>
        <tbody>
          {q.data.pipelines.map((p, i) => (
            <tr key={`p${i}`}>
              <td>
                <Link to={`${repoPath(org, repo)}/builds/${p.build}`}>
                  #{p.build} {p.event} · {p.name}
                </Link>
              </td>
              <td>{p.status}</td>
            </tr>
          ))}
          {q.data.statuses.map((s) => (
            <tr key={s.context}>
              <td>{s.target_url ? <a href={s.target_url}>{s.context}</a> : s.context}</td>
              <td>
                {s.state} {s.description && <span className="muted">{s.description}</span>}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  )
}

function Refs({ org, repo }: { org: string; repo: string }) {
  const branches = useQuery({ queryKey: keys.code.branches(org, repo), queryFn: () => endpoints.code.branches(org, repo) })
  const tags = useQuery({ queryKey: keys.code.tags(org, repo), queryFn: () => endpoints.code.tags(org, repo) })
  const qc = useQueryClient()
  const nav = useNavigate()
  const [made, setMade] = useState('')
  const autoTag = useMutation({
    mutationFn: () => endpoints.code.autoTag(org, repo),
    onSuccess: (r) => {
      if (r.build) return nav(`${repoPath(org, repo)}/builds/${r.build.number}`)
      setMade(r.tag)
      return qc.invalidateQueries({ queryKey: keys.code.tags(org, repo) })
    },
  })
  const [deployOf, setDeployOf] = useState('')
  const table = (label: string, items: { name: string; default: boolean; commit: CodeCommit }[], action: (name: string, isDefault: boolean) => ReactNode) =>
    items.length === 0 ? (
      <p className="muted">No {label.toLowerCase()}.</p>
    ) : (
      <div className="tablewrap">
        <table aria-label={label}>
          <tbody>
            {items.map((r) => (
              <tr key={r.name} data-ref={r.name}>
                <td>
                  <Link to={codeHref(org, repo, 'tree', r.name, '')}>{r.name}</Link> {r.default && <span className="tag">default</span>}
                </td>
                <td>
                  <Link to={`${repoPath(org, repo)}/-/commit/${r.commit.sha}`}>{r.commit.title}</Link>
                  <div className="muted">{ago(r.commit.committed_at)}</div>
                </td>
                <td>
                  <CheckState state={r.commit.checks} />
                </td>
                <td>{action(r.name, r.default)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    )
  return (
    <>
      <h1>Branches</h1>
      <QueryView q={branches} what="Loading the branches">
        {(l) =>
          table('Branches', l.items, (name, isDefault) =>
            isDefault ? null : <Link to={`${repoPath(org, repo)}/-/pulls?new=${encodeURIComponent(name)}`}>Open a pull request</Link>,
          )
        }
      </QueryView>
      <h2>Tags</h2>
      <p>
        <button type="button" onClick={() => autoTag.mutate()} disabled={autoTag.isPending}>
          Auto-generate a tag
        </button>{' '}
        <span className="muted">the next version on the default branch, or its own auto_tag pipelines</span>
      </p>
      <FormError error={autoTag.error} />
      {made && <Notice kind="success">Tagged {made}.</Notice>}
      <QueryView q={tags} what="Loading the tags">
        {(l) =>
          table('Tags', l.items, (name) => (
            <button type="button" className="secondary small" onClick={() => setDeployOf(deployOf === name ? '' : name)}>
              Deploy…
            </button>
          ))
        }
      </QueryView>
      {deployOf && <DeployPanel org={org} repo={repo} tag={deployOf} />}
    </>
  )
}

/** A tag's Deploy buttons: the environments of .cnb/tag_deploy.yml, each allowed or why not. */
function DeployPanel({ org, repo, tag }: { org: string; repo: string; tag: string }) {
  const q = useQuery({ queryKey: keys.code.deployEnvironments(org, repo, tag), queryFn: () => endpoints.code.deployEnvironments(org, repo, tag) })
  const nav = useNavigate()
  const deploy = useMutation({
    mutationFn: (environment: string) => endpoints.code.deploy(org, repo, { tag, environment }),
    onSuccess: (b) => nav(`${repoPath(org, repo)}/builds/${b.number}`),
  })
  return (
    <section aria-label={`Deploy ${tag}`} className="mergebox">
      <h3>Deploy {tag}</h3>
      <QueryView q={q} what="Loading the environments">
        {(d) =>
          d.environments.length === 0 ? (
            <p className="muted">
              No environments: declare them in <code>.cnb/tag_deploy.yml</code> on the default branch.
            </p>
          ) : (
            <ul className="comments">
              {d.environments.map((e) => (
                <li key={e.name}>
                  <button type="button" onClick={() => deploy.mutate(e.name)} disabled={!e.allowed || deploy.isPending} title={e.why}>
                    Deploy to {e.name}
                  </button>{' '}
                  {e.description} {!e.allowed && e.why && <span className="muted">({e.why})</span>}
                  {e.last && (
                    <span className="muted">
                      {' '}
                      · last: <Link to={`${repoPath(org, repo)}/builds/${e.last.build}`}>#{e.last.build}</Link> {e.last.status}
                    </span>
                  )}
                </li>
              ))}
            </ul>
          )
        }
      </QueryView>
      <FormError error={deploy.error} />
    </section>
  )
}
