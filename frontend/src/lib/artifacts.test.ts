import { deployTokenUsage } from './artifacts'

describe('deploy token usage', () => {
  it('names the token once and uses it for the CLI and the registry', () => {
    const got = deployTokenUsage('http://nimbus.local:8080', 'http://nimbus.local:8080/ML/Trainer.git', 'ML', 'Trainer', 'nbd_x').split('\n')
    expect(got[0]).toBe('export NIMBUS_DEPLOY_TOKEN=nbd_x')
    expect(got[1]).toContain('http://nimbus.local:8080/downloads/nimbus-linux-amd64')
    expect(got[2]).toBe('NIMBUS_TOKEN=$NIMBUS_DEPLOY_TOKEN nimbus artifact pull --server http://nimbus.local:8080 ML/Trainer PACKAGE latest')
    expect(got[3]).toBe('docker login nimbus.local:8080 -u deploy -p "$NIMBUS_DEPLOY_TOKEN"')
    expect(got[4]).toBe('docker pull nimbus.local:8080/ml/trainer/NAME:TAG')
  })
})
