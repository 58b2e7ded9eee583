import { render, screen, waitFor } from '@testing-library/react'
import { MemoryRouter } from 'react-router'
import { DiffView, RecordView, factLabel, jobLabel } from './Provenance'
import type { Record as RecordT } from '../lib/types'

const rec: RecordT = {
  _type: 'https://in-toto.io/Statement/v1',
  predicateType: 'https://slsa.dev/provenance/v1',
  subject: [{ name: 'ml/trainer/model/abc/model.tgz', digest: { sha256: 'ee'.repeat(32) }, annotations: { repo: 'ml/trainer', package: 'model', version: 'abc', file: 'model.tgz', size: 2048, buildScoped: false } }],
  predicate: {
    buildDefinition: {
      buildType: 'https://nimbus.build/provenance/cnb-pipeline/v1',
      externalParameters: { repository: 'ml/trainer', ref: 'refs/heads/main', event: 'push', pipeline: 'pipeline-1', pipelineName: 'train-gpu', plan: {} },
      internalParameters: {
        runner: { class: 'cnb:arch:amd64:gpu', tags: ['cnb:arch:amd64:gpu'], cpus: 16, memoryGiB: 64, gpu: 'L40' },
        env: { EPOCHS: '10', HF_TOKEN: '***' },
        secrets: ['CNB_TOKEN', 'HF_TOKEN'],
        imports: [],
      },
      resolvedDependencies: [
        { uri: 'git+https://n/ml/trainer.git@refs/heads/main', digest: { gitCommit: '0123456789abcdef' } },
        { uri: 'oci://busybox:1', digest: { sha256: 'aa' }, annotations: { ref: 'sha256:aa', image: 'busybox:1', jobs: ['1.0 train / train'] } },
        { name: 'ml/trainer/data/nimbus-7/processed.tgz', digest: { sha256: 'dd' }, annotations: { repo: 'ml/trainer', package: 'data', version: 'nimbus-7', file: 'processed.tgz', size: 10, buildScoped: true } },
      ],
    },
    runDetails: {
      builder: { id: 'https://n/agents/a1', version: { 'nvidia-driver': '550.54.15', cuda: '12.4' }, builderDependencies: [{ name: 'gpu0', annotations: { model: 'NVIDIA L40', memoryMiB: 46068 } }] },
      metadata: { invocationId: 'x' },
      byproducts: [],
    },
  },
}

describe('Provenance', () => {
  it('shows the commit, images by digest, host facts, files in and out and masked secrets', () => {
    const { container } = render(
      <MemoryRouter>
        <RecordView rec={rec} jsonHref="/api/v1/repos/ml/trainer/pipelines/9/record" />
      </MemoryRouter>,
    )
    expect(container.textContent).toContain('0123456')
    expect(screen.getByTestId('record-images').textContent).toContain('sha256:aa')
    // The job by its name, not the record's key ("1.0 train / train"), which stays in the title.
    const job = screen.getByTestId('record-images').querySelector('[title="1.0 train / train"]')
    expect(job?.textContent).toBe('train')
    expect(screen.getByTestId('record-images').textContent).not.toContain('1.0')
    expect(container.textContent).toContain('NVIDIA L40 (46068 MiB)')
    expect(container.textContent).toContain('550.54.15')
    expect(screen.getByTestId('record-inputs').textContent).toContain('data/$CNB_BUILD_ID/processed.tgz')
    expect(screen.getByTestId('record-outputs').textContent).toContain('sha256:' + 'ee'.repeat(32))
    expect(screen.getByTestId('record-env').textContent).toContain('***')
    expect(screen.getByTestId('record-json').getAttribute('href')).toBe('/api/v1/repos/ml/trainer/pipelines/9/record')
  })

  it('says when only timings differ, and lists differences otherwise', () => {
    const { rerender } = render(<DiffView d={{ differences: [], timings: [{ key: 'pipeline', a_ms: 1000, b_ms: 1200 }] }} />)
    expect(screen.getByTestId('record-diff-same')).toBeTruthy()
    rerender(<DiffView d={{ differences: [{ category: 'host', key: 'nvidia-driver', a: '550', b: '560' }], timings: [] }} />)
    expect(screen.getByTestId('record-diff').querySelector('[data-category="host"]')?.textContent).toContain('560')
  })

  it('labels jobs by stage and job name, without the positions of the record key', () => {
    expect(jobLabel('0.0 prepare / prepare')).toBe('prepare')
    expect(jobLabel('1.2 build / unit tests')).toBe('build › unit tests')
    // Names that hold " / " themselves.
    expect(jobLabel('0.0 a / b / a / b')).toBe('a / b')
    expect(jobLabel('pipeline')).toBe('pipeline')
    expect(factLabel('outcome', '1.0 build / test exit code')).toBe('build › test: exit code')
    expect(factLabel('outcome', 'pipeline status')).toBe('pipeline status')
    expect(factLabel('image', '0.0 prepare / prepare')).toBe('prepare')
    expect(factLabel('env', 'EPOCHS')).toBe('EPOCHS')

    render(
      <DiffView
        d={{
          differences: [{ category: 'outcome', key: '0.0 prepare / prepare status', a: 'failed', b: 'success' }],
          timings: [
            { key: '0.0 prepare / prepare', a_ms: 1000, b_ms: 1200 },
            { key: '1.0 build / test', a_ms: 61_000, b_ms: null },
            { key: 'pipeline', a_ms: 62_000, b_ms: 1200 },
          ],
        }}
      />,
    )
    const diff = screen.getByTestId('record-diff')
    expect(diff.querySelector('[data-category="outcome"] code')?.textContent).toBe('prepare: status')
    const rows = [...screen.getByTestId('record-timings').querySelectorAll('tbody tr')].map((r) => r.querySelector('td')!.textContent)
    expect(rows).toEqual(['prepare', 'build › test', 'Whole pipeline'])
    expect(diff.textContent).not.toMatch(/\d\.\d /)
  })

  it('heads the timings table with its columns', () => {
    render(<DiffView d={{ differences: [], timings: [{ key: 'pipeline', a_ms: 1000, b_ms: 1200 }] }} />)
    const table = screen.getByTestId('record-timings')
    expect([...table.querySelectorAll('thead th')].map((th) => th.textContent)).toEqual(['Job', 'This run', 'Other run'])
    expect([...table.querySelectorAll('tbody td')].length).toBe(3)
  })

  it('shows a changed script as its text, line by line, from the other run to this one', async () => {
    const plan = { stages: [{ name: 'build', jobs: [{ name: 'compile', script: '' }] }] }
    render(
      <DiffView
        plan={plan}
        d={{
          differences: [
            { category: 'plan', key: 'stages[0].jobs[0].script', a: JSON.stringify('echo "hi"\nmake\nmake test'), b: JSON.stringify('echo "hi"\nmake all') },
            { category: 'plan', key: 'stages[0].jobs[0].timeout', a: '600', b: '300' },
          ],
          timings: [],
        }}
      />,
    )
    const cell = screen.getByTestId('script-diff')
    // The diff table loads apart from the page.
    await waitFor(() => expect(cell.querySelector('table.diff')).not.toBeNull())
    // Text, not JSON: no quotes escaped, no \n.
    expect(cell.textContent).not.toContain('\\n')
    expect(cell.textContent).not.toContain('\\"')
    const lines = [...cell.querySelectorAll('table.diff tr')].map((tr) => [tr.className, tr.querySelector('.code')?.textContent])
    expect(lines).toEqual([
      ['ctx', ' echo "hi"'],
      ['del', '-make all'],
      ['add', '+make'],
      ['add', '+make test'],
    ])
    expect(screen.getByTestId('record-diff').querySelector('[data-category="plan"] code')?.textContent).toBe('build › compile: script')
    // Other plan values stay as they are, side by side.
    expect(screen.getAllByTestId('script-diff')).toHaveLength(1)
    expect(screen.getByTestId('record-diff').textContent).toContain('600')
  })
})

