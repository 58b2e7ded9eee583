import { NavLink } from 'react-router'
import { useUser } from '../session'

/** The admin area's own navigation: teams and their money, every agent, the settings. */
export function AdminNav() {
  return (
    <nav aria-label="Admin" className="tabs">
      <NavLink to="/admin/teams">Teams and credit</NavLink>
      <NavLink to="/admin/agents">Agents</NavLink>
      <NavLink to="/admin/settings">Install settings</NavLink>
    </nav>
  )
}

/** The admin pages' frame; anyone who is not a platform admin is told so and sees nothing else. */
export function AdminPage({ title, children }: { title: string; children: React.ReactNode }) {
  const user = useUser()
  return (
    <section>
      <h1>Admin: {title}</h1>
      {!user.data?.is_admin ? (
        <p className="error" role="alert">
          Only platform admins see the admin area.
        </p>
      ) : (
        <>
          <AdminNav />
          {children}
        </>
      )}
    </section>
  )
}
