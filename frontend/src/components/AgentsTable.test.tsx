import { fireEvent, render, screen, within } from '@testing-library/react'
import { MemoryRouter } from 'react-router'
import { AgentsTable } from './AgentsTable'
import type { AgentInfo } from '../lib/types'

const gpu: AgentInfo = {
  id: 'ag-1', name: 'gpu-box', version: '1.4.0', tags: ['cnb:arch:amd64:gpu', 'cnb:arch:amd64:gpu:L40'], executor: 'docker',
  cpus: 16, free_cpus: 12, memory_bytes: 64 * 1024 ** 3, gpus: [{ index: 0, name: 'L40', memoryMiB: 46068 }], free_gpus: 0, concurrency: 2,
  whole_host: false, online: true, paused: true, last_seen_at: new Date().toISOString(), created_at: '2026-01-01T00:00:00Z',
  pipelines: [{ id: 9, name: 'train', runner_tag: 'cnb:arch:amd64:gpu', cpus: 4, org: 'ml lab', repo: 'trainer', build_number: 7, started_at: new Date().toISOString() }],
}
const idle: AgentInfo = { ...gpu, id: 'ag-2', name: '', executor: '', version: '', gpus: [], free_gpus: 0, memory_bytes: 0, online: false, paused: false, pipelines: [] }

const cells = (row: HTMLElement) => within(row).getAllByRole('cell').map((c) => c.textContent)

describe('AgentsTable', () => {
  it('shows the platform everything an admin needs: executor, memory, concurrency, which team runs what', () => {
    render(
      <MemoryRouter>
        <AgentsTable agents={[gpu, idle]} scope="platform" />
      </MemoryRouter>,
    )
    const table = screen.getByRole('table', { name: 'Agents' })
    expect(within(table).getAllByRole('columnheader').map((h) => h.textContent)).toEqual(['Agent', 'State', 'Tags', 'Capacity', 'Running', 'Last heartbeat'])
    const [, row, other] = within(table).getAllByRole('row')
    const c = cells(row)
    expect(c[0]).toBe('gpu-boxag-1 · docker · 1.4.0')
    expect(c[1]).toBe('● onlinepaused')
    expect(c[3]).toBe('12/16 cores free, 0/1 GPUs (L40), 64.0 GiBup to 2 pipelines')
    expect(c[4]).toMatch(/^ml lab\/trainer #7 train \(4 cores, since /)
    expect(within(row).getByRole('link').getAttribute('href')).toBe('/ml%20lab/trainer/builds/7')
    const o = cells(other)
    expect(o[0]).toBe('ag-2ag-2 · executor ? ')
    expect(o[1]).toBe('○ offline')
    expect(o[3]).toBe('12/16 cores freeup to 2 pipelines')
    expect(o[4]).toBe('idle')
  })

  it('shows a team its runners without the platform facts, and the actions only when given', () => {
    const pressed: string[] = []
    const { rerender } = render(
      <MemoryRouter>
        <AgentsTable agents={[gpu]} scope="team" actions={(a) => <button onClick={() => pressed.push(a.id)}>Pause</button>} />
      </MemoryRouter>,
    )
    const table = screen.getByRole('table', { name: 'Team runners' })
    expect(within(table).getAllByRole('columnheader').map((h) => h.textContent)).toEqual(['Runner', 'State', 'Tags', 'Capacity', 'Running', 'Last seen', 'Actions'])
    const c = cells(within(table).getAllByRole('row')[1])
    expect(c[0]).toBe('gpu-boxag-1 · 1.4.0')
    expect(c[3]).toBe('12/16 cores free, 0/1 GPUs (L40)')
    expect(c[4]).toBe('trainer #7 train')
    expect(screen.getByTestId('agent-state').textContent).toBe('● onlinepaused')
    fireEvent.click(screen.getByRole('button', { name: 'Pause' }))
    expect(pressed).toEqual(['ag-1'])

    rerender(
      <MemoryRouter>
        <AgentsTable agents={[gpu]} scope="team" />
      </MemoryRouter>,
    )
    expect(screen.queryByRole('columnheader', { name: 'Actions' })).toBeNull()
    expect(screen.queryByRole('button')).toBeNull()
  })
})
