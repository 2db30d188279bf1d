"""Background-job bookkeeping: compression job status (for the API) and Prometheus counters."""
