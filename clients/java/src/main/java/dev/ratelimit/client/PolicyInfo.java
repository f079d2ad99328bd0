// PolicyInfo.java — what the headers need of a policy besides its decision: name, quota (q) and
// window (w, µs; for a bucket the time to drain it). Immutable.
package dev.ratelimit.client;

public record PolicyInfo(String name, long quota, long windowUs) {}
