"""AnomalyGate: stops the run when ExampleValidator found anomalies."""
