// FailurePolicy.java — what a decision answers when ratelimitd cannot: OPEN admits, CLOSED denies.
package dev.ratelimit.client;

public enum FailurePolicy { OPEN, CLOSED }
