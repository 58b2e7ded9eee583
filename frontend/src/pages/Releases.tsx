import { Link, useNavigate, useParams, useSearchParams } from 'react-router'
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { seg } from '../lib/api'
import { endpoints } from '../lib/endpoints'
import type { Release } from '../lib/types'
import { FileTable } from '../components/FileTable'
import { RepoHeader, repoPath, useRepo } from '../components/RepoHeader'
import { CopyField, Empty, FormError, QueryView } from '../components/ui'
import { ago, shortSha } from '../lib/format'
import { fileCommands } from '../lib/artifacts'
import { keys } from '../lib/keys'

// The repo's releases: each tag's title, notes and files, linked to the build and commit that
// made it (git:release in a pipeline), with the commands that download its files with a deploy
// token. The selected release lives in the URL (?tag=).
export default function Releases() {
  const { org = '', repo = '' } = useParams()
  const [params] = useSearchParams()
  const tag = params.get('tag')
  const here = `${repoPath(org, repo)}/releases`
  return (
    <section>
      <RepoHeader org={org} repo={repo} />
      <h1>Releases</h1>
      <nav aria-label="Release path" className="crumbs">
        <Link to={here}>All releases</Link>
        {tag && <> / {tag}</>}
      </nav>
      {tag ? <ReleaseView org={org} repo={repo} tag={tag} here={here} /> : <ReleaseList org={org} repo={repo} here={here} />}
    </section>
  )
}

/** Who made a release: the build (linked) and its commit, or a person. */
function MadeBy({ org, repo, r }: { org: string; repo: string; r: Release }) {
  if (!r.build) {
    return (
      <>
        a person, at <code title={r.commit}>{shortSha(r.commit)}</code>
      </>
    )
  }
  return (
    <>
      <Link to={`${repoPath(org, repo)}/builds/${r.build.number}`}>build #{r.build.number}</Link> at <code title={r.commit}>{shortSha(r.commit)}</code>
    </>
  )
}

function Flags({ r }: { r: Release }) {
  return (
    <>
      {r.latest && <span className="tag">latest</span>} {r.pre_release && <span className="tag">pre-release</span>}
    </>
  )
}

function ReleaseList({ org, repo, here }: { org: string; repo: string; here: string }) {
  const q = useQuery({ queryKey: keys.repos.releases(org, repo), queryFn: () => endpoints.repos.releases.list(org, repo) })
  return (
    <QueryView q={q} what="Loading the releases">
      {(page) =>
        page.items.length === 0 ? (
          <Empty>
            <h3>No releases yet</h3>
            <p>
              A pipeline on a tag push makes one with <code>type: git:release</code> (options <code>title</code>, <code>description</code>, <code>attachments</code>).
            </p>
          </Empty>
        ) : (
          <div className="tablewrap">
            <table aria-label="Releases">
              <thead>
                <tr>
                  <th scope="col">Tag</th>
                  <th scope="col">Title</th>
                  <th scope="col">Made by</th>
                  <th scope="col">Updated</th>
                </tr>
              </thead>
              <tbody>
                {page.items.map((r) => (
                  <tr key={r.tag} data-release={r.tag}>
                    <td>
                      <Link to={`${here}?tag=${seg(r.tag)}`}>{r.tag}</Link> <Flags r={r} />
                    </td>
                    <td>{r.title}</td>
                    <td>
                      <MadeBy org={org} repo={repo} r={r} />
                    </td>
                    <td>{ago(r.updated_at)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )
      }
    </QueryView>
  )
}

function ReleaseView({ org, repo, tag, here }: { org: string; repo: string; tag: string; here: string }) {
  const q = useQuery({ queryKey: keys.repos.release(org, repo, tag), queryFn: () => endpoints.repos.releases.get(org, repo, tag) })
  const r = useRepo(org, repo)
  const qc = useQueryClient()
  const navigate = useNavigate()
  const remove = useMutation({
    mutationFn: () => endpoints.repos.releases.remove(org, repo, tag),
    onSuccess: () => {
      qc.invalidateQueries({ queryKey: keys.repos.releases(org, repo) })
      navigate(here)
    },
  })
  const server = r.data ? new URL(r.data.clone_url).origin : ''
  return (
    <QueryView q={q} what="Loading the release">
      {(rel) => (
        <>
          <h2>
            {rel.title} <Flags r={rel} />
          </h2>
          <p className="muted" data-testid="made-by">
            {rel.tag}, made by <MadeBy org={org} repo={repo} r={rel} />, {ago(rel.updated_at)}
          </p>
          {rel.notes && <pre className="notes">{rel.notes}</pre>}
          <FileTable label={`Files of ${rel.tag}`} files={rel.files ?? []} />
          {(rel.files ?? []).length > 0 && (
            <div className="card" data-testid="download">
              <h2>Download</h2>
              <p className="muted">
                With a deploy token of this repo in <code>$NIMBUS_DEPLOY_TOKEN</code>; check the sha256 before use.
              </p>
              {(rel.files ?? []).map((f) => {
                const c = fileCommands(server, `${org}/${repo}`, f)
                return (
                  <div key={f.name} data-download={f.name}>
                    <CopyField label={`curl ${f.name}`} value={c.curl} />
                    <CopyField label={`check ${f.name}`} value={c.verify} />
                  </div>
                )
              })}
            </div>
          )}
          {r.data?.permission === 'admin' && (
            <p>
              <button
                type="button"
                className="danger"
                disabled={remove.isPending}
                onClick={() => {
                  if (window.confirm(`Delete release ${rel.tag} and its files? The tag stays.`)) remove.mutate()
                }}
              >
                Delete release
              </button>
              <FormError error={remove.error} />
            </p>
          )}
        </>
      )}
    </QueryView>
  )
}
