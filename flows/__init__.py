"""Prefect flows of the release jobs: ``release`` (flows.release) and cron schedules
(flows.schedule)."""
