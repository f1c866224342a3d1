"""`tuner serve`: scheduled and drift-triggered tuning jobs, run one per GPU set."""
