import { Suspense, useEffect, useRef, useState } from 'react'
import { Link, NavLink, Navigate, Outlet, useLocation, useNavigate, useParams } from 'react-router'
import { useQuery, useQueryClient } from '@tanstack/react-query'
import { endpoints } from '../lib/endpoints'
import { BILLING_ROLES, WRITE_ROLES } from '../lib/types'
import { USER_KEY, useUser } from '../session'
import { ErrorBox, Loading } from './ui'
import { keys } from '../lib/keys'

export function useOrgs() {
  return useQuery({ queryKey: keys.orgs(), queryFn: () => endpoints.user.orgs() })
}

type OrgList = ReturnType<typeof useOrgs>['data']

/** The user's team of that name (team names compare without case). */
function teamNamed(list: OrgList, name: string | undefined) {
  return name ? list?.find((o) => o.name.toLowerCase() === name.toLowerCase()) : undefined
}

/** The current team's role, from the user's team list. */
export function useRole(org: string | undefined) {
  return teamNamed(useOrgs().data, org)?.role
}

/** Where the last team the user was on is kept, for the pages whose URL names none. */
export const TEAM_KEY = 'nimbus.team'

function readTeam(): string | undefined {
  try {
    return localStorage.getItem(TEAM_KEY) ?? undefined
  } catch {
    return undefined // storage disabled: nothing is remembered
  }
}

function writeTeam(name: string) {
  try {
    localStorage.setItem(TEAM_KEY, name)
  } catch {
    // storage disabled or full: the switcher just forgets
  }
}

/**
 * The team the header stands for: the route's team when its URL names one, else the last team
 * of the user's list the user was on (remembered in localStorage whenever a route names one of
 * their teams). Undefined while the list loads or when there is none.
 */
export function useCurrentTeam(org: string | undefined): string | undefined {
  const orgs = useOrgs()
  const mine = teamNamed(orgs.data, org)?.name
  useEffect(() => {
    if (mine) writeTeam(mine)
  }, [mine])
  if (org) return mine ?? org
  return teamNamed(orgs.data, readTeam())?.name
}

// Keys that move a closed select's choice. Browsers fire change on each of them, so a switcher
// that navigated on change would leave the page at every arrow press; with Alt, ArrowDown opens
// the list instead.
const BROWSE_KEYS = new Set(['ArrowUp', 'ArrowDown', 'ArrowLeft', 'ArrowRight', 'Home', 'End', 'PageUp', 'PageDown'])

/**
 * The team select. A choice made with the pointer navigates at once; one browsed to with the
 * keyboard (arrows, Home/End, typing a name) only moves the selection, and navigates on Enter or
 * when focus leaves the select; Escape puts the current team back.
 */
function TeamSwitcher({ current }: { current?: string }) {
  const orgs = useOrgs()
  const navigate = useNavigate()
  const list = orgs.data ?? []
  const [pending, setPending] = useState<string | null>(null)
  const keyboard = useRef(false)
  const currentValue = teamNamed(list, current)?.name ?? ''
  const go = (v: string) => {
    setPending(null)
    keyboard.current = false
    if (v === currentValue) return
    if (v === '+new') navigate('/new')
    else if (v) navigate(`/orgs/${encodeURIComponent(v)}`)
  }
  return (
    <div className="switcher">
      <label htmlFor="team-switcher" className="visually-hidden">
        Team
      </label>
      <select
        id="team-switcher"
        value={pending ?? currentValue}
        onPointerDown={() => (keyboard.current = false)}
        onKeyDown={(e) => {
          if (e.key === 'Enter') {
            if (pending !== null) {
              e.preventDefault()
              go(pending)
            }
          } else if (e.key === 'Escape') {
            setPending(null)
            keyboard.current = false
          } else if ((BROWSE_KEYS.has(e.key) && !e.altKey) || (e.key.length === 1 && e.key !== ' ' && !e.ctrlKey && !e.metaKey && !e.altKey)) {
            keyboard.current = true
          }
        }}
        onChange={(e) => {
          const v = e.target.value
          if (keyboard.current) setPending(v)
          else go(v)
        }}
        onBlur={() => {
          if (pending !== null) go(pending)
        }}
        disabled={orgs.isPending}
      >
        <option value="">{orgs.isPending ? 'Loading teams…' : list.length ? 'Choose a team' : 'No team yet'}</option>
        {list.map((o) => (
          <option key={o.id} value={o.name}>
            {o.name}
          </option>
        ))}
        <option value="+new">+ Create a team</option>
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
  const org = useCurrentTeam(params.org)
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
          <NavLink to="/account" className="muted" data-testid="username" title="Your account">
            {user.data.username}
          </NavLink>
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
  const v = useQuery({ queryKey: keys.version(), queryFn: () => endpoints.version(), staleTime: Infinity })
  return (
    <p className="muted small-print" data-testid="server-status">
      {v.isPending ? 'Connecting to the server…' : v.isError ? 'The server is unreachable.' : `Server version ${v.data.version}`}
    </p>
  )
}
