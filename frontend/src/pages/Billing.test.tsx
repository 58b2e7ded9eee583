import { render, screen, waitFor } from '@testing-library/react'
import { MemoryRouter, Route, Routes } from 'react-router'
import { QueryClient, QueryClientProvider } from '@tanstack/react-query'
import Billing from './Billing'
import type { BillingAccount, Usage } from '../lib/types'

const account: BillingAccount = {
  currency: 'CNY',
  balance: '12.3400',
  frozen: '0.6667',
  free_quota: { total_core_seconds: 576000, used_core_seconds: 3600, frozen_core_seconds: 0, left_core_seconds: 572400 },
  workspace_free_quota: { total_core_seconds: 5760000, used_core_seconds: 36000, frozen_core_seconds: 2400, left_core_seconds: 5721600 },
  month: '2026-06',
  month_spent: '3.2000',
  month_written_off: '0.0000',
  month_by_bucket: { build: { spent: '1.2000', written_off: '0.0000' }, workspace: { spent: '2.0000', written_off: '0.0000' } },
  spending_cap: null,
  low_balance_threshold: null,
  alert_webhook_url: '',
  topups: { enabled: false, min: '10.0000', max: '100000.0000' },
}

const row = (bucket: Usage['bucket'], runner_class: string, core_seconds: number, quota_core_seconds: number): Usage => ({
  date: '2026-06-01',
  bucket,
  runner_class,
  repo_id: 1,
  repo: 'trainer',
  pipelines: 1,
  core_seconds,
  quota_core_seconds,
  cost: '0.0000',
  written_off: '0.0000',
})

const usage = [row('build', 'cnb:arch:amd64', 3600, 3600), row('workspace', 'cnb:arch:amd64', 36000, 36000), row('workspace', 'cnb:arch:amd64:gpu', 7200, 0)]

function show() {
  vi.stubGlobal(
    'fetch',
    vi.fn(async (url: string) => {
      const path = url.split('?')[0]
      const answer =
        path === '/api/v1/orgs/ml/billing'
          ? account
          : path === '/api/v1/orgs/ml/billing/usage'
            ? { items: usage }
            : path === '/api/v1/orgs/ml/billing/ledger' || path === '/api/v1/orgs/ml/billing/notifications'
              ? { items: [] }
              : undefined
      return answer ? new Response(JSON.stringify(answer), { status: 200 }) : new Response('{"error":{"code":"not_found","message":"no"}}', { status: 404 })
    }),
  )
  const qc = new QueryClient({ defaultOptions: { queries: { retry: false } } })
  return render(
    <QueryClientProvider client={qc}>
      <MemoryRouter initialEntries={['/orgs/ml/billing']}>
        <Routes>
          <Route path="/orgs/:org/billing" element={<Billing />} />
        </Routes>
      </MemoryRouter>
    </QueryClientProvider>,
  )
}

afterEach(() => vi.unstubAllGlobals())

describe('Billing', () => {
  it('shows the builds’ and the workspaces’ free quotas apart', async () => {
    show()
    await waitFor(() => expect(screen.getByTestId('quota-left')).toBeTruthy())
    expect(screen.getByTestId('quota-left').textContent).toBe('159.0 core-h left')
    expect(screen.getByTestId('workspace-quota-left').textContent).toBe('1589.3 core-h left')
    expect(screen.getByText('Free build CPU quota, 2026-06')).toBeTruthy()
    expect(screen.getByText('Free workspace CPU quota, 2026-06')).toBeTruthy()
    expect(screen.getByTestId('month-by-bucket').textContent).toBe('builds 1.20 CNY · workspaces 2.00 CNY')
  })

  it('charts build and workspace usage in sections of their own', async () => {
    const { container } = show()
    await waitFor(() => expect(screen.getByTestId('usage-total')).toBeTruthy())
    expect(screen.getByTestId('usage-total').textContent).toBe('3 pipelines, 13.0 core-h settled in this period.')
    expect(screen.getByTestId('usage-build').textContent).toBe('1 pipeline, 1.00 core-h, 1.00 core-h of them from the free build quota')
    expect(screen.getByTestId('usage-workspace').textContent).toBe('2 pipelines, 12.0 core-h, 10.0 core-h of them from the free workspace quota')
    const legend = (bucket: string) => [...container.querySelectorAll(`[data-bucket="${bucket}"] figure`)][0].querySelectorAll('.legend li').length
    expect(legend('build')).toBe(1)
    expect(legend('workspace')).toBe(2)
    expect([...container.querySelectorAll('figcaption')].map((c) => c.textContent)).toEqual([
      'Builds: core-hours per day by runner class',
      'Builds: core-hours per day by repo',
      'Workspaces: core-hours per day by runner class',
      'Workspaces: core-hours per day by repo',
    ])
  })
})
