import { CLI_DOWNLOAD } from '../lib/downloads'
import { Link, useParams, useSearchParams } from 'react-router'
import { useQuery } from '@tanstack/react-query'
import { seg } from '../lib/api'
import { endpoints } from '../lib/endpoints'
import type { ArtifactVersion } from '../lib/types'
import { FileTable } from '../components/FileTable'
import { RepoHeader, repoPath, useRepo } from '../components/RepoHeader'
import { CopyField, Empty, QueryView } from '../components/ui'
import { ago, bytes, shortSha } from '../lib/format'
import { fileCommands, registryCommands, versionCommand } from '../lib/artifacts'
import { keys } from '../lib/keys'

// The repo's artifacts: model files (packages → versions → files, with the build and commit
// that produced each version and the commands that download them) and the OCI registry's pull
// commands. The selected package and version live in the URL (?package=&version=), so a link
// opens the same view.
export default function Artifacts() {
  const { org = '', repo = '' } = useParams()
  const [params] = useSearchParams()
  const pkg = params.get('package')
  const version = params.get('version')
  const r = useRepo(org, repo)
  const here = `${repoPath(org, repo)}/artifacts`
  return (
    <section>
      <RepoHeader org={org} repo={repo} />
      <h1>Artifacts</h1>
      <StorageLine org={org} />
      <nav aria-label="Artifact path" className="crumbs">
        <Link to={here}>Model files</Link>
        {pkg && (
          <>
            {' / '}
            <Link to={`${here}?package=${seg(pkg)}`}>{pkg}</Link>
          </>
        )}
        {pkg && version && <> / {version}</>}
      </nav>
      {!pkg && <Packages org={org} repo={repo} here={here} />}
      {pkg && !version && <Versions org={org} repo={repo} pkg={pkg} here={here} />}
      {pkg && version && r.data && <Files org={org} repo={repo} pkg={pkg} version={version} server={new URL(r.data.clone_url).origin} />}
      {r.data && <RegistryCard cloneUrl={r.data.clone_url} org={org} repo={repo} />}
    </section>
  )
}

/** The team's storage against its quota; members only (others get nothing, quietly). */
function StorageLine({ org }: { org: string }) {
  const q = useQuery({ queryKey: keys.org.storage(org), queryFn: () => endpoints.orgs.storage(org), retry: false })
  if (!q.data) return null
  const u = q.data
  return (
    <p className="muted" data-testid="storage">
      Team storage: {bytes(u.used_bytes)}
      {u.quota_bytes > 0 ? ` of ${bytes(u.quota_bytes)}` : ' (no quota)'} — registry {bytes(u.registry_bytes)}, model files {bytes(u.file_bytes)}
    </p>
  )
}

function Packages({ org, repo, here }: { org: string; repo: string; here: string }) {
  const q = useQuery({
    queryKey: keys.repos.artifactPackages(org, repo),
    queryFn: () => endpoints.repos.artifacts.packages(org, repo),
  })
  return (
    <QueryView q={q} what="Loading the packages">
      {(page) =>
        page.items.length === 0 ? (
          <Empty>
            <h3>No model files yet</h3>
            <p>
              A pipeline publishes one with its job token (<code>CNB_TOKEN</code>, set in every job, where the <code>nimbus</code> CLI is on the <code>PATH</code>):{' '}
              <code>nimbus artifact push {`${org}/${repo}`} PACKAGE VERSION FILE…</code> (or <code>PUT</code> the file to{' '}
              <code>{endpoints.repos.artifacts.fileUrl(org, repo, 'PACKAGE', 'VERSION', 'FILE')}</code> with <code>X-Checksum-Sha256</code>). Elsewhere,{' '}
              <a href={CLI_DOWNLOAD} download="nimbus" data-testid="cli-download">
                download the nimbus CLI
              </a>{' '}
              from this server.
            </p>
          </Empty>
        ) : (
          <div className="tablewrap">
            <table aria-label="Packages">
              <thead>
                <tr>
                  <th scope="col">Package</th>
                  <th scope="col">Versions</th>
                  <th scope="col">Latest</th>
                  <th scope="col">Updated</th>
                </tr>
              </thead>
              <tbody>
                {page.items.map((p) => (
                  <tr key={p.name} data-package={p.name}>
                    <td>
                      <Link to={`${here}?package=${seg(p.name)}`}>{p.name}</Link>
                    </td>
                    <td>{p.version_count}</td>
                    <td>
                      <Link to={`${here}?package=${seg(p.name)}&version=${seg(p.latest)}`}>{p.latest}</Link>
                    </td>
                    <td>{ago(p.updated_at)}</td>
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

/** Who produced a version: the build (linked) and its commit, or the person. */
function Producer({ org, repo, v }: { org: string; repo: string; v: ArtifactVersion }) {
  if (!v.build) return <>{v.pushed_by || '—'}</>
  return (
    <>
      <Link to={`${repoPath(org, repo)}/builds/${v.build.number}`}>build #{v.build.number}</Link> at{' '}
      <code title={v.build.commit}>{shortSha(v.build.commit)}</code> (
      <Link to={`${repoPath(org, repo)}/builds/${v.build.number}?pipeline=${v.build.pipeline_id}`} data-testid="provenance-link" title="the reproducibility record of the pipeline that pushed it">
        provenance
      </Link>
      )
    </>
  )
}

function Versions({ org, repo, pkg, here }: { org: string; repo: string; pkg: string; here: string }) {
  const q = useQuery({
    queryKey: keys.repos.artifactVersions(org, repo, pkg),
    queryFn: () => endpoints.repos.artifacts.versions(org, repo, pkg),
  })
  return (
    <QueryView q={q} what="Loading the versions">
      {(page) => (
        <div className="tablewrap">
          <table aria-label={`Versions of ${pkg}`}>
            <thead>
              <tr>
                <th scope="col">Version</th>
                <th scope="col">Files</th>
                <th scope="col">Size</th>
                <th scope="col">Produced by</th>
                <th scope="col">Pushed by</th>
                <th scope="col">Published</th>
              </tr>
            </thead>
            <tbody>
              {page.items.map((v) => (
                <tr key={v.version} data-version={v.version}>
                  <td>
                    <Link to={`${here}?package=${seg(pkg)}&version=${seg(v.version)}`}>{v.version}</Link>
                  </td>
                  <td>{v.file_count}</td>
                  <td>{bytes(v.size)}</td>
                  <td>
                    <Producer org={org} repo={repo} v={v} />
                  </td>
                  <td>{v.pushed_by || '—'}</td>
                  <td>{ago(v.created_at)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </QueryView>
  )
}

function Files({ org, repo, pkg, version, server }: { org: string; repo: string; pkg: string; version: string; server: string }) {
  const q = useQuery({
    queryKey: keys.repos.artifactVersion(org, repo, pkg, version),
    queryFn: () => endpoints.repos.artifacts.version(org, repo, pkg, version),
  })
  const slug = `${org}/${repo}`
  return (
    <QueryView q={q} what="Loading the files">
      {(v) => (
        <>
          <p>
            <strong>
              {pkg} {v.version}
            </strong>{' '}
            — {v.file_count} file{v.file_count === 1 ? '' : 's'}, {bytes(v.size)}, produced by <Producer org={org} repo={repo} v={v} />
            {v.build && v.pushed_by && <> (run by {v.pushed_by})</>}, {ago(v.created_at)}
          </p>
          <FileTable label={`Files of ${pkg} ${v.version}`} files={v.files ?? []} />
          <div className="card" data-testid="download">
            <h2>Download</h2>
            <p className="muted">
              With a deploy token of this repo (Settings → Deploy tokens) in <code>$NIMBUS_DEPLOY_TOKEN</code>, and the{' '}
              <a href={CLI_DOWNLOAD} download="nimbus" data-testid="cli-download">
                nimbus CLI
              </a>{' '}
              (<code>curl -fsSLo nimbus {server}/downloads/nimbus-linux-amd64 &amp;&amp; chmod +x nimbus</code>). Downloads resume where a cut connection left them; check the sha256 before
              use.
            </p>
            <CopyField label="nimbus artifact pull (every file)" value={versionCommand(server, slug, pkg, v.version)} />
            {(v.files ?? []).map((f) => {
              const c = fileCommands(server, slug, f)
              return (
                <div key={f.name} data-download={f.name}>
                  <h3>{f.name}</h3>
                  <CopyField label={`curl ${f.name}`} value={c.curl} />
                  <CopyField label={`check ${f.name}`} value={c.verify} />
                </div>
              )
            })}
          </div>
        </>
      )}
    </QueryView>
  )
}

function RegistryCard({ cloneUrl, org, repo }: { cloneUrl: string; org: string; repo: string }) {
  const c = registryCommands(cloneUrl, org, repo)
  return (
    <div className="card">
      <h2>Images and OCI artifacts</h2>
      <p className="muted">
        The repo's OCI registry holds images and artifacts at <code>{c.name}/NAME:TAG</code>; authenticate with a deploy token or a personal token with registry:read.
      </p>
      <CopyField label="docker login" value={c.login} />
      <CopyField label="docker pull" value={c.docker} />
      <CopyField label="oras pull" value={c.oras} />
    </div>
  )
}
