import { useQuery } from '@tanstack/react-query'
import { endpoints } from '../lib/endpoints'
import { useUser } from '../session'
import { AdminPage } from '../components/AdminNav'
import { PricingPanel } from '../components/Pricing'
import { QueryView } from '../components/ui'
import { keys } from '../lib/keys'

export default function AdminSettings() {
  const user = useUser()
  const q = useQuery({ queryKey: keys.admin.settings(), queryFn: endpoints.admin.settings, enabled: !!user.data?.is_admin })
  return (
    <AdminPage title="Install settings">
      <p className="muted">The settings this server runs with. They are set in its environment (or flags) and take effect on restart; credentials are never shown.</p>
      <QueryView q={q} what="Loading the settings">
        {(s) => (
          <div className="tablewrap">
            <table aria-label="Install settings">
              <thead>
                <tr>
                  <th scope="col">Setting</th>
                  <th scope="col">Value</th>
                  <th scope="col">Set by</th>
                </tr>
              </thead>
              <tbody>
                {s.settings.map((x) => (
                  <tr key={x.name} data-setting={x.name}>
                    <th scope="row">{x.name}</th>
                    <td>
                      {x.value}
                      {x.note && (
                        <>
                          <br />
                          <span className="muted">{x.note}</span>
                        </>
                      )}
                    </td>
                    <td>{x.env ? <code>{x.env}</code> : '—'}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </QueryView>
      <PricingPanel />
    </AdminPage>
  )
}
