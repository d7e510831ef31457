"""Exceptions that experiment binaries report as a one-line error and a non-zero exit."""


class ConfigError(ValueError):
  """A config value, flag or workdir that cannot be used as given."""


class NonFiniteLossError(FloatingPointError):
  """Training produced a NaN or inf loss; carries the first bad step."""

  def __init__(self, step: int, last_checkpoint: int | None):
    self.step = step
    self.last_checkpoint = last_checkpoint
    kept = ("no checkpoint was written yet" if last_checkpoint is None
            else f"the last good checkpoint (step {last_checkpoint}) is kept")
    super().__init__(f"non-finite loss (NaN or inf) at step {step}; stopping; {kept}")
