package runner

import "context"

// ServiceConfig is how the pipeline services (services: docker) are run.
type ServiceConfig struct{}

// prepareServices starts the pipeline's services.
func (x *run) prepareServices(ctx context.Context) (release, error) {
	if len(x.lease.Plan.Services) > 0 {
		x.log.Warn("services are not supported by this agent yet; ignored", "services", len(x.lease.Plan.Services))
	}
	return nil, nil
}
