import { useParams } from 'react-router'
import { RepoHeader } from '../components/RepoHeader'
import { Empty } from '../components/ui'

// The artifact registry's API is not in the server yet; this page says so until it lands.
export default function Artifacts() {
  const { org = '', repo = '' } = useParams()
  return (
    <section>
      <RepoHeader org={org} repo={repo} />
      <h1>Artifacts</h1>
      <Empty>The artifact registry is not available on this server yet.</Empty>
    </section>
  )
}
