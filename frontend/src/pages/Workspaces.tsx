import { useParams, useSearchParams } from 'react-router'
import { useQuery } from '@tanstack/react-query'
import { Empty, QueryView } from '../components/ui'
import { endpoints } from '../lib/endpoints'
import { WorkspaceCard } from '../components/Workspace'
import { keys } from '../lib/keys'

/** The team's workspaces, polled; `?all=true` shows the ended ones too. */
export default function Workspaces() {
  const { org = '' } = useParams()
  const [search, setSearch] = useSearchParams()
  const all = search.get('all') === 'true'
  const q = useQuery({
    queryKey: keys.workspaces.list(org, all),
    queryFn: () => endpoints.workspaces.list(org, all),
    refetchInterval: 3000,
    refetchIntervalInBackground: false,
  })
  return (
    <section>
      <div className="pagehead">
        <h1>Workspaces</h1>
        <label className="check">
          <input
            type="checkbox"
            name="all"
            checked={all}
            onChange={(e) => {
              const s = new URLSearchParams(search)
              if (e.target.checked) s.set('all', 'true')
              else s.delete('all')
              setSearch(s, { replace: true })
            }}
          />
          Show ended workspaces
        </label>
      </div>
      <QueryView q={q} what="Loading workspaces">
        {(list) =>
          list.length === 0 ? (
            <Empty>
              {all ? 'This team has had no workspace yet.' : 'No workspace is running.'} Open one from a repo's page with “Open workspace”.
            </Empty>
          ) : (
            <div className="workspaces" data-testid="workspaces">
              {list.map((w) => (
                <WorkspaceCard key={w.id} w={w} />
              ))}
            </div>
          )
        }
      </QueryView>
    </section>
  )
}
