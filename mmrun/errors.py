"""User-facing errors. Each carries the exit code the CLI's error boundary ends with.

Exit codes (documented in the README and docs/usage.md):
  0  success
  1  a failure while running (download failed, engine failed, out of memory, ...)
  2  a usage or input error (unknown model, bad option, bad media, missing dependency)
  3  a batch finished, but some of its prompts failed (their error lines say why)
  4  mmrun score: a metric's mean is beyond --fail-below or --fail-above
  130 interrupted (Ctrl-C)
  141 standard output was closed by its reader (`mmrun ... | head`): stopped quietly, as a
      Unix tool that SIGPIPE ends (128 + 13)
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_PARTIAL = 3
EXIT_BELOW_THRESHOLD = 4
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141


class MmrunError(Exception):
    """An error meant for the user: one line saying what is wrong and what to do."""

    exit_code = EXIT_FAILURE

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class UsageError(MmrunError):
    """Bad options or arguments."""

    exit_code = EXIT_USAGE


class UnknownModelError(UsageError):
    """No loader is registered under the given key."""


class MediaError(UsageError):
    """A media source is missing, unreadable, or cannot be decoded."""


class DownloadError(MmrunError):
    """A download failed (network, HTTP status, size cap, timeout)."""


class RemoteCodeError(UsageError):
    """A model needs code from its repository and the user did not allow it."""


class UnsupportedModelError(UsageError):
    """The installed vLLM cannot run this model's architecture."""


class MissingDependencyError(UsageError):
    """A package mmrun needs for this command is not installed."""


class TemplateUnavailableError(MmrunError):
    """The model's processor or tokenizer, which renders its prompt, cannot be loaded now
    (no network, not in the Hugging Face cache). A dry run goes on without the prompt."""

    def __init__(self, message: str, hint: str | None, *, model: str, source: str) -> None:
        super().__init__(message, hint)
        self.model = model
        self.source = source


class EngineError(MmrunError):
    """vLLM failed while starting or generating."""


class EngineDied(EngineError):
    """The engine as a whole stopped while generating (its process died): the prompts in it
    can run again on a new engine. ``log``: the engine's log, kept."""

    def __init__(self, message: str, hint: str | None = None, log: str | None = None) -> None:
        super().__init__(message, hint)
        self.log = log


class OutputError(MmrunError):
    """Results could not be written (a full disk, a write error); those before are kept."""


class PluginError(MmrunError):
    """A plugin could not be loaded or registered something invalid."""


# A source longer than this is cut to about 60 characters when an error line or a table
# shows it (a base64 image in a cell is a megabyte of text, a signed URL hundreds of
# characters); a path of a deep folder stays whole.
SHOWN_CHARS = 100


def shown(text: str) -> str:
    """``text`` as one line of an error or a table shows it: whole up to 100 characters, else
    its first 40 and last 20 around an ellipsis, with its length."""
    if len(text) <= SHOWN_CHARS:
        return text
    return f"{text[:40]}…{text[-20:]} ({len(text):,} characters)"
