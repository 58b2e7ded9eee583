import { render, screen, waitFor } from '@testing-library/react'
import { MemoryRouter, Route, Routes } from 'react-router'
import { QueryClient, QueryClientProvider } from '@tanstack/react-query'
import Billing from './Billing'
import type { BillingAccount, LedgerEntry, Pricing, Usage } from '../lib/types'

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
  time_zone: 'Asia/Shanghai, UTC+08:00',
  credit_from: ['root'],
}

const cls = { tags: [], min_cores: 1, max_cores: 64, default_cores: 8, fixed_cores: 0, memory_gib_per_core: 2, gpu: '', gpu_memory_gb: 0, free_quota: true }
const pricing: Pricing = {
  currency: 'CNY',
  time_zone: 'Asia/Shanghai, UTC+08:00',
  free_core_hours: '160',
  free_workspace_core_hours: '1600',
  freeze_interval_seconds: 300,
  freeze_rule: 'While a pipeline runs, its next 5 minutes are reserved (frozen) from the free quota or the balance, every 5 minutes.',
  team_runners: { free: true, note: 'Time on your team’s own runners is free.' },
  classes: [
    { ...cls, class: 'cnb:arch:amd64', price_per_core_hour: '0.1250', price_per_hour: '1.0000', hour_cores: 8 },
    { ...cls, class: 'cnb:arch:amd64:gpu', fixed_cores: 16, min_cores: 16, max_cores: 16, default_cores: 16, gpu: 'any', gpu_memory_gb: 48, free_quota: false,
      price_per_core_hour: '0.5000', price_per_hour: '8.0000', hour_cores: 16 },
  ],
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

const entry = (id: number, kind: LedgerEntry['kind'], pipeline_id: number | null, repo: string | null, build_number: number | null): LedgerEntry => ({
  id,
  kind,
  amount: '0.10000000',
  written_off: '0.00000000',
  balance_change: '-0.10000000',
  frozen_change: '0.00000000',
  pipeline_id,
  repo,
  build_number,
  uncovered_ms: null,
  note: '',
  created_at: '2026-06-01T10:00:00Z',
})

function show(ledger: LedgerEntry[] = []) {
  vi.stubGlobal(
    'fetch',
    vi.fn(async (url: string) => {
      const path = url.split('?')[0]
      const answer =
        path === '/api/v1/orgs/ml/billing'
          ? account
          : path === '/api/v1/pricing'
            ? pricing
          : path === '/api/v1/orgs/ml/billing/usage'
            ? { items: usage }
            : path === '/api/v1/orgs/ml/billing/ledger'
              ? { items: ledger }
            : path === '/api/v1/orgs/ml/billing/notifications'
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
    expect(screen.getByTestId('quota-left').textContent).toBe('159.00 core-hours left')
    expect(screen.getByTestId('workspace-quota-left').textContent).toBe('1589.33 core-hours left')
    expect(screen.getByText('Free build CPU quota, 2026-06')).toBeTruthy()
    expect(screen.getByText('Free workspace CPU quota, 2026-06')).toBeTruthy()
    expect(screen.getByTestId('month-by-bucket').textContent).toBe('builds 1.20 CNY · workspaces 2.00 CNY')
  })

  it('charts build and workspace usage in sections of their own', async () => {
    const { container } = show()
    await waitFor(() => expect(screen.getByTestId('usage-total')).toBeTruthy())
    expect(screen.getByTestId('usage-total').textContent).toBe('3 pipelines, 13.00 core-hours settled in this period.')
    expect(screen.getByTestId('usage-build').textContent).toBe('1 pipeline, 1.00 core-hours, 1.00 core-hours of them from the free build quota')
    expect(screen.getByTestId('usage-workspace').textContent).toBe('2 pipelines, 12.00 core-hours, 10.00 core-hours of them from the free workspace quota')
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

  it('uses one unit on the page and names the billing time zone by every date range and chart', async () => {
    const { container } = show()
    await waitFor(() => expect(screen.getByTestId('usage-total')).toBeTruthy())
    const text = container.textContent ?? ''
    expect(text).not.toMatch(/core-s\b|core-h\b|core-seconds/)
    expect(screen.getByTestId('usage-zone').textContent).toBe('Days run from midnight to midnight in the billing time zone, Asia/Shanghai, UTC+08:00.')
    expect([...container.querySelectorAll('[data-bucket] .zone')].map((z) => z.textContent)).toEqual(['Days in Asia/Shanghai, UTC+08:00', 'Days in Asia/Shanghai, UTC+08:00'])
    // The exact core-seconds are in the tooltip only.
    expect(container.querySelector('[data-quota="build"] [title]')?.getAttribute('title')).toBe('3600 core-seconds used of 576000 core-seconds')
  })

  it('shows the prices with their currency, the quotas and the pre-freeze rule', async () => {
    const { container } = show()
    await waitFor(() => expect(container.querySelector('[data-class="cnb:arch:amd64:gpu"]')).toBeTruthy())
    const gpu = container.querySelector('[data-class="cnb:arch:amd64:gpu"]')!.textContent
    expect(gpu).toContain('16, fixed')
    expect(gpu).toContain('any model, 48 GB')
    expect(gpu).toContain('0.50 CNY')
    expect(gpu).toContain('8.00 CNY at 16 cores')
    expect(container.querySelector('[data-class="cnb:arch:amd64"]')!.textContent).toContain('1–64 (8 by default)')
    expect(screen.getByTestId('freeze-rule').textContent).toContain('next 5 minutes are reserved')
    expect(screen.getByTestId('free-quota-rule').textContent).toContain('160 free CPU core-hours for builds and 1600 for workspaces')
  })

  it('links a ledger entry to its pipeline’s build page, and leaves one of a deleted repo as text', async () => {
    const { container } = show([entry(3, 'settle', 34, 'ml/trainer', 12), entry(2, 'settle', 21, null, null), entry(1, 'grant', null, null, null)])
    await waitFor(() => expect(container.querySelector('table[aria-label="Ledger"]')).toBeTruthy())
    const cells = [...container.querySelectorAll('table[aria-label="Ledger"] tbody tr')].map((tr) => tr.querySelectorAll('td')[6])
    const link = cells[0].querySelector('a')!
    expect(link.getAttribute('href')).toBe('/ml/trainer/builds/12?pipeline=34')
    expect(link.textContent).toBe('ml/trainer #12 · pipeline 34')
    expect(cells[1].querySelector('a')).toBeNull()
    expect(cells[1].textContent).toBe('pipeline 21')
    expect(cells[2].textContent).toBe('—')
    expect(screen.getAllByTestId('ledger-pipeline')).toHaveLength(1)
  })

  it('names who grants credit when the installation takes no payments', async () => {
    show()
    await waitFor(() => expect(screen.getByTestId('no-topups')).toBeTruthy())
    expect(screen.getByTestId('no-topups').textContent).toContain('Ask root (the installation’s platform admin) to grant credit to ml.')
  })
})
