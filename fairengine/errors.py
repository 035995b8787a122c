"""Exception types raised at FairEngine's public boundary.

Every error a user can cause by bad input is a :class:`FairEngineError` whose message names the
column or parameter at fault and says what was expected. They subclass ``ValueError`` so code
that already catches ``ValueError`` keeps working.
"""

from __future__ import annotations


class FairEngineError(ValueError):
    """Base class of all user-facing FairEngine errors."""


class DataContractError(FairEngineError):
    """The data does not satisfy the audit-dataset contract (roles, types, values)."""


class DataValidationError(FairEngineError):
    """Data validation (Great Expectations) failed; ``failures`` lists every failed check."""

    def __init__(self, message: str, failures: list[str] | None = None) -> None:
        super().__init__(message)
        self.failures = list(failures or [])


class ConfigError(FairEngineError):
    """The audit configuration is invalid (unknown key, wrong type, missing file).

    ``problems`` lists every problem found when a whole config was checked at once.
    """

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = list(problems or [message])


class ModelLoadError(FairEngineError):
    """The model URI could not be loaded or the model cannot score the data."""


class MlflowUnavailableError(FairEngineError):
    """The MLflow store the audit needs does not answer (a server that is down, a folder that
    cannot be written); the CLI exits with code 3."""


class OrchestrationUnavailableError(FairEngineError):
    """The workflow engine an audit runs on could not start (e.g. Prefect's embedded server did
    not answer within its start-up timeout); nothing was audited or logged."""


class ResultLoggingError(FairEngineError):
    """The audit ran and its results are on local disk, but recording them (MLflow) failed."""
