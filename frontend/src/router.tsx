import { lazy, type ComponentType } from 'react'
import { Navigate, createBrowserRouter, useParams, type RouteObject } from 'react-router'
import { AuthLayout, Layout } from './components/Layout'

// Every page is its own chunk: the initial download is the shell (React, the router, the query
// cache and this file), and each page loads when first visited.
const page = (load: () => Promise<{ default: ComponentType }>) => {
  const C = lazy(load)
  return <C />
}

function OrgRedirect() {
  const { org } = useParams()
  return <Navigate to={`/orgs/${encodeURIComponent(org ?? '')}`} replace />
}

export const routes: RouteObject[] = [
  {
    element: <AuthLayout />,
    children: [
      { path: '/login', element: page(() => import('./pages/Login')) },
      { path: '/signup', element: page(() => import('./pages/Signup')) },
      { path: '/forgot-password', element: page(() => import('./pages/ForgotPassword')) },
      { path: '/reset-password', element: page(() => import('./pages/ResetPassword')) },
    ],
  },
  {
    element: <Layout />,
    children: [
      { path: '/', element: page(() => import('./pages/Home')) },
      { path: '/new', element: page(() => import('./pages/NewTeam')) },
      { path: '/invitations/accept', element: page(() => import('./pages/AcceptInvitation')) },
      { path: '/account', element: page(() => import('./pages/Account')) },
      { path: '/settings/tokens', element: page(() => import('./pages/Tokens')) },
      { path: '/admin', element: <Navigate to="/admin/teams" replace /> },
      { path: '/admin/teams', element: page(() => import('./pages/AdminTeams')) },
      { path: '/admin/agents', element: page(() => import('./pages/Agents')) },
      { path: '/admin/settings', element: page(() => import('./pages/AdminSettings')) },
      { path: '/orgs/:org', element: page(() => import('./pages/Team')) },
      { path: '/orgs/:org/members', element: page(() => import('./pages/Members')) },
      { path: '/orgs/:org/agents', element: page(() => import('./pages/TeamAgents')) },
      { path: '/orgs/:org/billing', element: page(() => import('./pages/Billing')) },
      { path: '/orgs/:org/workspaces', element: page(() => import('./pages/Workspaces')) },
      { path: '/:org', element: <OrgRedirect /> },
      { path: '/:org/:repo', element: page(() => import('./pages/Repo')) },
      { path: '/:org/:repo/settings', element: page(() => import('./pages/RepoSettings')) },
      { path: '/:org/:repo/-/:kind', element: page(() => import('./pages/CodeRoutes')) },
      { path: '/:org/:repo/-/commit/:sha', element: page(() => import('./pages/History')) },
      { path: '/:org/:repo/-/pulls/:number', element: page(() => import('./pages/Pull')) },
      { path: '/:org/:repo/artifacts', element: page(() => import('./pages/Artifacts')) },
      { path: '/:org/:repo/releases', element: page(() => import('./pages/Releases')) },
      { path: '/:org/:repo/metrics', element: page(() => import('./pages/Metrics')) },
      { path: '/:org/:repo/workspaces/:id', element: page(() => import('./pages/Workspace')) },
      { path: '/:org/:repo/builds/:number', element: page(() => import('./pages/Build')) },
      { path: '/:org/:repo/builds/:number/jobs/:job', element: page(() => import('./pages/Job')) },
      { path: '*', element: page(() => import('./pages/NotFound')) },
    ],
  },
]

export const createRouter = () => createBrowserRouter(routes)
