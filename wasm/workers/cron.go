package main

import "context"

// cronSettings configure the Cron Trigger's task.
type cronSettings struct{}

// parseCron reads the cron task's settings from the Worker's vars and
// secrets.
func parseCron(env getenv) (cronSettings, error) { return cronSettings{}, nil }

// Scheduled is the Cron Trigger's task.
func (a *app) Scheduled(ctx context.Context) error { return nil }
