"""errors.py — the package's one exception. A "no" is never an error (it is a Decision with
allowed False); this is for input to fix (code invalid_policy, unknown_policy, invalid_key,
invalid_cost), a library Redis lacks (library_missing), or an unreadable answer (protocol)."""


class RateLimitError(ValueError):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
