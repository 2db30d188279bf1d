"""The one error the LLM layer raises."""


class LLMError(Exception):
    """An LLM call failed, timed out, or answered nothing usable.

    `retryable` is True for failures that may pass if tried later (timeouts, connection
    errors, 429, 5xx/529 overload); False for configuration errors (401/403/400) and for
    empty or malformed answers. The message never contains credentials.
    """

    def __init__(
        self, message: str, *, status_code: int | None = None, retryable: bool = False
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.retryable = retryable
