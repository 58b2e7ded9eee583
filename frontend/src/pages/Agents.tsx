import { useQuery } from '@tanstack/react-query'
import { endpoints } from '../lib/endpoints'
import { useUser } from '../session'
import { AdminPage } from '../components/AdminNav'
import { PricingPanel } from '../components/Pricing'
import { Empty, QueryView } from '../components/ui'
import { AgentsTable } from '../components/AgentsTable'
import { keys } from '../lib/keys'
import { AgentSetup } from '../components/AgentSetup'

export default function Agents() {
  const user = useUser()
  const q = useQuery({ queryKey: keys.admin.agents(), queryFn: () => endpoints.admin.agents(), refetchInterval: 5000, enabled: !!user.data?.is_admin })
  return (
    <AdminPage title="Agents">
      <QueryView q={q} what="Loading agents">
        {(list) =>
          list.length === 0 ? (
            <Empty>No agent has registered. Start one with a command below.</Empty>
          ) : (
            <AgentsTable agents={list} scope="platform" />
          )
        }
      </QueryView>
      {user.data?.is_admin && <AgentSetup />}
      <PricingPanel />
    </AdminPage>
  )
}
