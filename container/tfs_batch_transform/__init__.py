"""A local SageMaker Batch Transform runner: `run_job(JobConfig(...))` or `tfs-batch-transform`."""

from .job import ConfigError, FileFailure, JobConfig, JobSummary, run_job

__all__ = ["ConfigError", "FileFailure", "JobConfig", "JobSummary", "run_job"]
