package runner

import "context"

// CacheConfig is where and how big the agent's cache volumes (docker.volumes) are.
type CacheConfig struct{}

// prepareVolumes mounts the pipeline's docker.volumes.
func (x *run) prepareVolumes(ctx context.Context) (release, error) {
	if len(x.lease.Plan.Volumes) > 0 {
		x.log.Warn("docker.volumes are not supported by this agent yet; ignored", "volumes", len(x.lease.Plan.Volumes))
	}
	return nil, nil
}
