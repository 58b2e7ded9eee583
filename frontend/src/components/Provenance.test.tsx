import { render, screen } from '@testing-library/react'
import { MemoryRouter } from 'react-router'
import { DiffView, RecordView } from './Provenance'
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
    expect(screen.getByTestId('record-images').textContent).toContain('1.0 train / train')
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
})
