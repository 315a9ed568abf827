"""The runtime: admission of plans, the runner that ticks their trees, and what a run is made of."""
