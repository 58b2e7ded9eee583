import { useParams } from 'react-router'
import { RepoHeader, useRepo } from '../components/RepoHeader'
import { CopyField, Empty } from '../components/ui'

// The registry's JSON listing (packages → versions → files) is not in the API yet, so this page
// cannot list what was pushed; it gives the commands that pull from the repo's OCI registry
// (/v2/, which takes a deploy or personal token, not the browser session).
export default function Artifacts() {
  const { org = '', repo = '' } = useParams()
  const r = useRepo(org, repo)
  const host = r.data ? new URL(r.data.clone_url).host : location.host
  const plain = r.data?.clone_url.startsWith('http:') ? ' --plain-http' : ''
  const name = `${host}/${org.toLowerCase()}/${repo.toLowerCase()}`
  return (
    <section>
      <RepoHeader org={org} repo={repo} />
      <h1>Artifacts</h1>
      <Empty>
        <p>Listing artifacts here needs the registry's API, which this server does not offer yet.</p>
      </Empty>
      {r.data && (
        <div className="card">
          <h2>Pull from the registry</h2>
          <p className="muted">
            Images and artifacts of this repo live at <code>{name}/NAME:TAG</code>. Authenticate with a deploy token (Settings → Deploy tokens) or a personal token with
            registry:read.
          </p>
          <CopyField label="docker login" value={`docker login ${host} -u deploy -p "$NIMBUS_DEPLOY_TOKEN"`} />
          <CopyField label="docker pull" value={`docker pull ${name}/NAME:TAG`} />
          <CopyField label="oras pull" value={`oras pull${plain} -u deploy -p "$NIMBUS_DEPLOY_TOKEN" ${name}/NAME:TAG`} />
        </div>
      )}
    </section>
  )
}
