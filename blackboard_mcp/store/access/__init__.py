"""The Redis side of auth's checks: admission (revocation and rate limit in one round trip),
the rate limiter, the revocation list and the audit stream."""
