import { Suspense } from 'react'
import { Link, NavLink, Navigate, Outlet, useLocation, useNavigate, useParams } from 'react-router'
import { useQuery, useQueryClient } from '@tanstack/react-query'
import { endpoints } from '../lib/endpoints'
import { BILLING_ROLES, WRITE_ROLES } from '../lib/types'
import { USER_KEY, useUser } from '../session'
import { ErrorBox, Loading } from './ui'

export function useOrgs() {
  return useQuery({ queryKey: ['orgs'], queryFn: () => endpoints.user.orgs() })
}

/** The current team's role, from the user's team list. */
export function useRole(org: string | undefined) {
  const orgs = useOrgs()
  return orgs.data?.find((o) => o.name.toLowerCase() === org?.toLowerCase())?.role
}

function TeamSwitcher({ current }: { current?: string }) {
  const orgs = useOrgs()
  const navigate = useNavigate()
  const list = orgs.data ?? []
  return (
    <div className="switcher">
      <label htmlFor="team-switcher" className="visually-hidden">
        Team
      </label>
      <select
        id="team-switcher"
        value={current ? list.find((o) => o.name.toLowerCase() === current.toLowerCase())?.name ?? '' : ''}
        onChange={(e) => {
          const v = e.target.value
          if (v === '+new') navigate('/new')
          else if (v) navigate(`/orgs/${encodeURIComponent(v)}`)
        }}
        disabled={orgs.isPending}
      >
        <option value="">{orgs.isPending ? 'Loading teams…' : list.length ? 'Choose a team' : 'No team yet'}</option>
        {list.map((o) => (
          <option key={o.id} value={o.name}>
            {o.name}
          </option>
        ))}
        <option value="+new">＋ Create a team</option>
      </select>
    </div>
  )
}

export function Layout() {
  const user = useUser()
  const loc = useLocation()
  const params = useParams()
  const qc = useQueryClient()
  const navigate = useNavigate()
  const org = params.org
  const role = useRole(org)
  if (user.isPending) return <Loading what="Loading your session" />
  if (user.isError) return <ErrorBox error={user.error} retry={() => user.refetch()} />
  if (!user.data) return <Navigate to={`/login?next=${encodeURIComponent(loc.pathname + loc.search + loc.hash)}`} replace />
  const logout = async () => {
    try {
      await endpoints.auth.logout()
    } finally {
      qc.clear()
      qc.setQueryData(USER_KEY, null)
      navigate('/login')
    }
  }
  const teamBase = org ? `/orgs/${encodeURIComponent(org)}` : ''
  return (
    <>
      <a className="skip" href="#main">
        Skip to content
      </a>
      <header className="topbar">
        <Link to="/" className="brand">
          <span aria-hidden="true">☁</span> Nimbus
        </Link>
        <TeamSwitcher current={org} />
        <nav aria-label="Main" className="mainnav">
          {org && (
            <>
              <NavLink to={teamBase} end>
                Repos
              </NavLink>
              {role && WRITE_ROLES.has(role) && <NavLink to={`${teamBase}/workspaces`}>Workspaces</NavLink>}
              <NavLink to={`${teamBase}/members`}>Members</NavLink>
              <NavLink to={`${teamBase}/agents`}>Agents</NavLink>
              {role && BILLING_ROLES.has(role) && <NavLink to={`${teamBase}/billing`}>Billing</NavLink>}
            </>
          )}
          <NavLink to="/settings/tokens">Tokens</NavLink>
          {user.data.is_admin && <NavLink to="/admin">Admin</NavLink>}
        </nav>
        <div className="me">
          <span className="muted" data-testid="username">
            {user.data.username}
          </span>
          <button type="button" className="secondary small" onClick={logout}>
            Sign out
          </button>
        </div>
      </header>
      <main id="main" tabIndex={-1}>
        <Suspense fallback={<Loading />}>
          <Outlet />
        </Suspense>
      </main>
    </>
  )
}

export function AuthLayout() {
  return (
    <main id="main" className="authpage">
      <p className="brand big">
        <span aria-hidden="true">☁</span> Nimbus
      </p>
      <Suspense fallback={<Loading />}>
        <Outlet />
      </Suspense>
      <ServerVersion />
    </main>
  )
}

function ServerVersion() {
  const v = useQuery({ queryKey: ['version'], queryFn: () => endpoints.version(), staleTime: Infinity })
  return (
    <p className="muted small-print" data-testid="server-status">
      {v.isPending ? 'Connecting to the server…' : v.isError ? 'The server is unreachable.' : `Server version ${v.data.version}`}
    </p>
  )
}
