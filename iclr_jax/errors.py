"""Exceptions that experiment binaries report as a one-line error and a non-zero exit."""

import contextlib


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


class ArgumentError(ConfigError):
  """A library function's argument that cannot be used; neutral wording ("lr must be > 0"),
  which a recipe turns into the config path ("config.optim.lr must be > 0") with
  `config_section`. A ConfigError, so binaries report it in one line either way."""

  def __init__(self, argument: str, template: str):
    self.argument, self.template = argument, template
    super().__init__(template.format(argument))


@contextlib.contextmanager
def config_section(prefix: str, **paths: str):
  """Re-raises an ArgumentError from the block with its argument named as `prefix.argument`
  (e.g. prefix 'config.model'), or as `paths[argument]` where given (batch_size=
  'config.batch_size')."""
  try:
    yield
  except ArgumentError as e:
    name = paths.get(e.argument, f"{prefix}.{e.argument}")
    raise ConfigError(e.template.format(name)) from None
