// errors.ts — the one error type of the package. A decision that says "no" is never an error
// (it is a Decision with allowed = false); this is for input that must be fixed, a library that
// cannot be found, and a back-end that answered something unreadable.
// code: 'invalid_policy' | 'unknown_policy' | 'invalid_key' | 'invalid_cost' |
//       'library_missing' | 'protocol' | 'unavailable'.

export class RateLimitError extends Error {
  constructor(public readonly code: string, message: string) {
    super(message);
    this.name = 'RateLimitError';
  }
}
