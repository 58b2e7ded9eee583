import { render, screen } from '@testing-library/react'
import { MemoryRouter } from 'react-router'
import { QueryClient, QueryClientProvider } from '@tanstack/react-query'
import type { ReactNode } from 'react'
import { PipelineCard, remedyLink } from './PipelineGraph'
import { USER_KEY } from '../session'
import type { Pipeline } from '../lib/types'

// PipelineCard reads the currency from the (cached) pricing; here nothing answers it.
function Wrap({ children }: { children: ReactNode }) {
  const qc = new QueryClient({ defaultOptions: { queries: { retry: false, enabled: false } } })
  return (
    <QueryClientProvider client={qc}>
      <MemoryRouter>{children}</MemoryRouter>
    </QueryClientProvider>
  )
}

const p: Pipeline = {
  id: 7,
  key: 'pipeline-0',
  name: 'train',
  status: 'queued',
  reason: 'no online agent serves cnb:arch:amd64:gpu',
  waiting: false,
  blockers: [],
  runner_tag: 'cnb:arch:amd64:gpu',
  cpus: 8,
  started_at: null,
  finished_at: null,
  core_seconds: 0,
  cost: '0.0000',
  written_off: '0.0000',
  uncovered_ms: null,
  workspace: false,
  ready_at: null,
  workspace_state: null,
  stages: [
    { name: 'fetch', status: 'queued', parallel: true, jobs: [{ id: 1, name: 'data', status: 'queued' }, { id: 2, name: 'weights', status: 'queued' }] },
    { name: 'run', status: 'queued', parallel: false, jobs: [{ id: 3, name: 'fit', status: 'queued' }, { id: 4, name: 'eval', status: 'queued' }] },
  ],
}

describe('PipelineCard', () => {
  it('shows a waiting pipeline with every blocker and its remedy link', () => {
    const waiting: Pipeline = {
      ...p,
      waiting: true,
      reason: 'no online agent serves cnb:arch:amd64:gpu; balance insufficient: needs 0.6667 CNY',
      blockers: [
        { code: 'no_agent', message: 'no online agent serves cnb:arch:amd64:gpu', remedy: 'agents' },
        { code: 'balance', message: 'balance insufficient: needs 0.6667 CNY', remedy: 'topup' },
      ],
    }
    const { container } = render(
      <Wrap>
        <PipelineCard p={waiting} org="ml team" jobHref={(id) => `/o/r/builds/1/jobs/${id}`} />
      </Wrap>,
    )
    expect(container.querySelector('[data-status]')!.getAttribute('data-status')).toBe('waiting')
    expect(screen.getByText(/no online agent serves/)).toBeTruthy()
    expect(screen.getByText(/balance insufficient/)).toBeTruthy()
    expect(container.querySelector('[data-remedy="topup"]')!.getAttribute('href')).toBe('/orgs/ml%20team/billing')
    expect(container.querySelector('[data-remedy="agents"]')!.getAttribute('href')).toBe('/orgs/ml%20team/agents')
  })

  it("shows a running pipeline that waits for a place on its agent's cluster, and why", () => {
    const pending: Pipeline = {
      ...p,
      status: 'running',
      waiting: true,
      blockers: [{ code: 'capacity', message: 'waiting for a node with a free nvidia.com/gpu (0/1 nodes are available: 1 Insufficient nvidia.com/gpu; the cluster may be scaling up)' }],
    }
    const { container } = render(
      <Wrap>
        <PipelineCard p={pending} org="ml" jobHref={(id) => `/o/r/builds/1/jobs/${id}`} />
      </Wrap>,
    )
    expect(container.querySelector('[data-blocker="capacity"]')!.textContent).toMatch(/waiting for a node with a free nvidia\.com\/gpu/)
  })

  it('sends a platform admin to the admin Agents page, and others to team runners only for what they serve', () => {
    const waiting: Pipeline = {
      ...p,
      waiting: true,
      reason: 'no online agent serves cnb:arch:amd64:gpu',
      blockers: [{ code: 'no_agent', message: 'no online agent serves cnb:arch:amd64:gpu', remedy: 'platform_agents' }],
    }
    const card = (admin: boolean) => {
      const qc = new QueryClient({ defaultOptions: { queries: { retry: false, enabled: false } } })
      qc.setQueryData(USER_KEY, { username: 'root', is_admin: admin })
      return render(
        <QueryClientProvider client={qc}>
          <MemoryRouter>
            <PipelineCard p={waiting} org="ml" jobHref={(id) => `/o/r/builds/1/jobs/${id}`} />
          </MemoryRouter>
        </QueryClientProvider>,
      )
    }
    const asAdmin = card(true)
    expect(asAdmin.container.querySelector('a[data-remedy="platform_agents"]')!.getAttribute('href')).toBe('/admin/agents')
    asAdmin.unmount()
    const asMember = card(false)
    expect(asMember.container.querySelector('a[data-remedy]')).toBeNull()
    expect(asMember.container.querySelector('[data-remedy="platform_agents"]')!.textContent).toContain("platform's admins")
    expect(remedyLink('agents', 'ml', false)).toEqual({ label: 'See agents, or bring your own runner', href: '/orgs/ml/agents' })
    expect(remedyLink('agents', 'ml', true)?.href).toBe('/admin/agents')
  })

  it('says in words what money ended a pipeline, with the remedy and the re-run', () => {
    const ended: Pipeline = { ...p, status: 'terminated', reason: 'insufficient_balance' }
    const { container } = render(
      <Wrap>
        <PipelineCard p={ended} org="ml" jobHref={(id) => `/o/r/builds/1/jobs/${id}`} />
      </Wrap>,
    )
    const reason = container.querySelector('.reason')!
    expect(reason.textContent).toContain("the team's balance could not pay for its next window")
    expect(reason.textContent).not.toContain('insufficient_balance')
    expect(reason.textContent).toContain('re-run')
    expect(container.querySelector('[data-remedy="topup"]')!.getAttribute('href')).toBe('/orgs/ml/billing')
  })

  it('links the spending cap of a pipeline that gave up waiting for money', () => {
    const stale: Pipeline = {
      ...p,
      status: 'failed',
      reason: "gave up after 24 hours in the queue: the team's monthly spending cap would be passed: 0.1467 paid this month",
    }
    const { container } = render(
      <Wrap>
        <PipelineCard p={stale} org="ml" jobHref={(id) => `/o/r/builds/1/jobs/${id}`} />
      </Wrap>,
    )
    expect(container.querySelector('.reason')!.textContent).toContain('0.1467 paid this month')
    expect(container.querySelector('[data-remedy="spending_cap"]')).toBeTruthy()
  })

  it('shows the runner, cores, reason and the jobs placed parallel or serial', () => {
    const { container } = render(
      <Wrap>
        <PipelineCard p={p} jobHref={(id) => `/o/r/builds/1/jobs/${id}`} />
      </Wrap>,
    )
    expect(screen.getByText('cnb:arch:amd64:gpu')).toBeTruthy()
    expect(screen.getByText('8 cores')).toBeTruthy()
    expect(screen.getByText(/no online agent serves/)).toBeTruthy()
    const cell = (name: string) => (container.querySelector(`[data-job="${name}"]`) as HTMLElement).parentElement!
    expect([cell('data').style.gridColumn, cell('data').style.gridRow]).toEqual(['1', '2'])
    expect([cell('weights').style.gridColumn, cell('weights').style.gridRow]).toEqual(['1', '3'])
    expect([cell('fit').style.gridColumn, cell('eval').style.gridColumn]).toEqual(['2', '3'])
    expect(cell('eval').className).toContain('after')
    expect(cell('data').className).toContain('par')
    expect(container.querySelector('[data-job="fit"]')!.getAttribute('href')).toBe('/o/r/builds/1/jobs/3')
    expect(screen.getByText('parallel')).toBeTruthy()
    expect(screen.getByText('serial')).toBeTruthy()
    expect(screen.queryByTestId('awaited')).toBeNull()
  })

  it('shows the time spent awaiting apart from the duration', () => {
    const started = new Date(Date.now() - 300_000).toISOString()
    const running: Pipeline = {
      ...p,
      status: 'running',
      reason: '',
      started_at: started,
      awaited_ms: 125_000,
      host: { agentId: 'agt_1', name: 'gpu-7', version: '1.2.3', executor: 'docker', host: { gpuDriver: '550.54.15', cudaVersion: '12.4', cpuModel: 'Xeon' } },
    }
    render(
      <Wrap>
        <PipelineCard p={running} jobHref={(id) => `/o/r/builds/1/jobs/${id}`} />
      </Wrap>,
    )
    expect(screen.getByTestId('awaited').textContent).toBe('awaited 2m 5s')
    expect(screen.getByTitle('duration').textContent).toBe('5m 0s')
    const host = screen.getByTestId('host')
    expect(host.textContent).toBe('on gpu-7 · driver 550.54.15')
    expect(host.getAttribute('title')).toContain('CUDA 12.4')
  })
})
